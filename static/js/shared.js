// The shared chat page (templates/chats/shared.html): the snapshot's messages come as plain text;
// here each is rendered as the chat page renders it (markdown.js: markdown-it with raw HTML off,
// then DOMPurify), notes as text, and avatars drawn. Nothing here talks to the hub: the page's
// Content-Security-Policy allows no connection, and there is no socket.

import { renderContent } from "./markdown.js";
import { avatar } from "./ui.js";

for (const content of document.querySelectorAll(".msg-content.shared-source")) {
  const text = content.textContent;
  const note = content.closest(".msg")?.classList.contains("kind-note");
  const format = note ? "text" : content.dataset.format;
  renderContent(content, text, format);
  content.classList.remove("shared-source");
  content.classList.toggle("markdown", format === "markdown");
}

for (const slot of document.querySelectorAll(".msg-side .avatar[data-name]")) {
  slot.replaceWith(avatar(slot.dataset.picture || "", slot.dataset.name, "md"));
}

document.body.classList.add("js-ready");
