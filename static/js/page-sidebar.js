// The sidebar on the pages beside the chats (Agents, Memory, API tokens…): at phone width it
// slides in from ☰, as on the chat page; the theme switch works here too.

import { themeButton } from "./theme.js";

const scrim = document.getElementById("scrim");

function openSidebar(open) {
  document.body.classList.toggle("sidebar-shown", open);
  scrim.hidden = !open;
  for (const button of document.querySelectorAll(".sidebar-open")) button.setAttribute("aria-expanded", String(open));
}

for (const button of document.querySelectorAll(".sidebar-open")) button.addEventListener("click", () => openSidebar(true));
document.getElementById("sidebar-close").addEventListener("click", () => openSidebar(false));
scrim.addEventListener("click", () => openSidebar(false));
document.addEventListener("keydown", (event) => {
  if (event.key === "Escape" && document.body.classList.contains("sidebar-shown")) openSidebar(false);
});
themeButton(document.getElementById("theme-toggle"));
document.body.classList.add("js-ready");
