// The Memory page, live: when a block changes (here, in another tab, or written by an agent), the
// hub says memory.updated on the user's socket and the blocks are read again. The form below
// them is left alone, so nothing being typed is lost.

import { Connection } from "./net.js";

const blocks = document.getElementById("memory-blocks");

async function refresh() {
  try {
    const response = await fetch(location.pathname, { credentials: "same-origin", headers: { Accept: "text/html" } });
    if (!response.ok) return;
    const page = new DOMParser().parseFromString(await response.text(), "text/html");
    const fresh = page.getElementById("memory-blocks");
    if (fresh) blocks.replaceChildren(...fresh.childNodes);
  } catch { /* the next change tries again */ }
}

const socket = new Connection("/ws/directory/", {
  onEvent: (event) => { if (event.type === "memory.updated") refresh(); },
  onOpen: () => refresh(), // what changed before the socket was up, or while it was down
});
socket.start();
