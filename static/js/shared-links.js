// The Shared links page, live: a link made or revoked here, in another tab or from a chat's Share
// dialog (share.updated on the user's socket) reads the list again. Copy buttons copy a link.

import "./copy.js";
import { Connection, readPartAgain } from "./net.js";

const list = document.getElementById("shared-links");

async function refresh() {
  try { await readPartAgain(list); } catch { /* the next change tries again */ }
}

const socket = new Connection("/ws/directory/", {
  onEvent: (event) => { if (event.type === "share.updated") refresh(); },
  // Every open reads the list again, the first too: a link made or revoked after the server drew
  // this page but before the socket joined the user's group sent its event to nobody.
  onOpen: () => refresh(),
});
socket.start();
