// The Memory page, live: when a block changes (here, in another tab, or written by an agent), the
// hub says memory.updated on the user's socket and the blocks are read again. The form below
// them is left alone, so nothing being typed is lost.

import { Connection, readPartAgain } from "./net.js";

const blocks = document.getElementById("memory-blocks");

async function refresh() {
  try { await readPartAgain(blocks); } catch { /* the next change tries again */ }
}

const socket = new Connection("/ws/directory/", {
  onEvent: (event) => { if (event.type === "memory.updated") refresh(); },
  onOpen: () => refresh(), // what changed before the socket was up, or while it was down
});
socket.start();
