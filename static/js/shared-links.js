// The Shared links page, live: a link made or revoked here, in another tab or from a chat's Share
// dialog (share.updated on the user's socket) reads the list again. Copy buttons copy a link.

import "./copy.js";
import { Connection } from "./net.js";

const list = document.getElementById("shared-links");

async function refresh() {
  try {
    const response = await fetch(location.pathname + location.search, { credentials: "same-origin",
      headers: { Accept: "text/html" } });
    if (!response.ok) return;
    const page = new DOMParser().parseFromString(await response.text(), "text/html");
    const fresh = page.getElementById("shared-links");
    if (fresh) list.replaceChildren(...fresh.childNodes);
  } catch { /* the next change tries again */ }
}

const socket = new Connection("/ws/directory/", {
  onEvent: (event) => { if (event.type === "share.updated") refresh(); },
  // Every open reads the list again, the first too: a link made or revoked after the server drew
  // this page but before the socket joined the user's group sent its event to nobody.
  onOpen: () => refresh(),
});
socket.start();
