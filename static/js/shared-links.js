// The Shared links page, live: a link made or revoked here, in another tab or from a chat's Share
// dialog (share.updated on the user's socket) reads the list again. Copy buttons copy a link.

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

list.addEventListener("click", async (event) => {
  const button = event.target.closest("button[data-copy-share]");
  if (!button) return;
  const field = document.getElementById(button.dataset.copyShare);
  field.focus();
  field.select();
  const label = button.dataset.label || button.textContent;
  button.dataset.label = label;
  try {
    await navigator.clipboard.writeText(field.value);
    button.textContent = "Copied";
  } catch {
    button.textContent = "Press Ctrl+C to copy";
  }
  setTimeout(() => { button.textContent = label; }, 2500);
});

const socket = new Connection("/ws/directory/", {
  onEvent: (event) => { if (event.type === "share.updated") refresh(); },
  onOpen: ({ first }) => { if (!first) refresh(); },
});
socket.start();
