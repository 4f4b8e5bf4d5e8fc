// The Usage page, live: when a reply that spends tokens ends (usage.updated on the user's socket)
// the figures are read again. A burst of replies ending reads them at most once a second.

import { Connection, readPartAgain } from "./net.js";

const figures = document.getElementById("usage-figures");
const AT_MOST_EVERY_MS = 1000;
let reading = false;
let again = false;
let lastRead = 0;

async function refresh() {
  if (reading) { again = true; return; }
  reading = true;
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, lastRead + AT_MOST_EVERY_MS - Date.now())));
  try { await readPartAgain(figures); } catch { /* the next change tries again */ }
  lastRead = Date.now();
  reading = false;
  if (again) { again = false; refresh(); }
}

const socket = new Connection("/ws/directory/", {
  onEvent: (event) => { if (event.type === "usage.updated") refresh(); },
  onOpen: () => refresh(), // what ended before the socket was up, or while it was down
});
socket.start();
