// The composer: Enter sends, Shift+Enter breaks the line; note mode; editing a message; @mention
// completion of member agents; a length check before sending; drafts kept per chat, so nothing
// typed is lost to a reload, a failed send or a dropped connection.

import { paperclipIcon } from "./attachments.js";
import { h, icon } from "./ui.js";

const WORD = "[\\p{L}\\p{N}_]";

export function mentionsAgent(name, text) {
  const escaped = name.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  return new RegExp(`(?<!${WORD}|@)@${escaped}(?!${WORD})`, "iu").test(text);
}

export function answeringAgents(members, text) {
  const mentioned = members.filter((agent) => mentionsAgent(agent.name, text));
  if (mentioned.length) return mentioned.filter((agent) => agent.reply_policy !== "never");
  return members.filter((agent) => (agent.reply_policy || "always") === "always");
}

export class Composer {
  constructor({ limits, draftKey, placeholder, onSend, onSaveEdit, onResubmit = null, members = () => [], onAttach = null,
    allowNotes = true, files = null }) {
    this.onResubmit = onResubmit;
    this.files = files; // a FileTray (attachments.js), or null where files cannot go
    this.limits = limits;
    this.draftKey = draftKey;
    this.onSend = onSend;
    this.onSaveEdit = onSaveEdit;
    this.members = members;
    this.onAttach = onAttach;
    this.noteMode = false;
    this.editing = null;
    this.mention = null;
    this.basePlaceholder = placeholder;

    this.input = h("textarea", { id: "composer-input", rows: "1", class: "composer-input", autocomplete: "off",
      "aria-describedby": "composer-hint composer-count", "aria-autocomplete": "list",
      "aria-controls": "mention-list", "aria-expanded": "false", placeholder });
    this.mentionList = h("ul", { id: "mention-list", class: "mention-list", role: "listbox", "aria-label": "Agents to mention", hidden: true });
    this.banner = h("div", { class: "composer-banner", hidden: true });
    this.count = h("span", { id: "composer-count", class: "composer-count", "aria-live": "polite" });
    this.error = h("div", { id: "composer-error", class: "composer-error", role: "alert", hidden: true });
    this.noteButton = allowNotes ? h("button", { type: "button", class: "btn-ghost btn-small note-toggle", "aria-pressed": "false",
      "aria-label": "Note mode",
      title: "Note mode: write an annotation for this thread; agents read notes but do not reply (Alt+N)",
      text: "✎ Note", onclick: () => this.setNoteMode(!this.noteMode) }) : null;
    this.attachButton = onAttach ? h("button", { type: "button", class: "btn-ghost btn-small attach", "aria-haspopup": "menu",
      "aria-label": "Attach a remote",
      "aria-expanded": "false", title: "Attach a connected remote (tool server) to this thread",
      onclick: () => onAttach(this.attachButton) }, icon("link"), h("span", { text: "Remote" })) : null;
    this.filePicker = files ? h("input", { type: "file", multiple: true, hidden: true, id: "file-picker",
      onchange: () => { files.add(this.filePicker.files); this.filePicker.value = ""; this.focus(); } }) : null;
    this.fileButton = files ? h("button", { type: "button", class: "btn-ghost btn-small attach-file", "aria-label": "Attach files",
      title: "Attach files (or drop them on the chat, or paste an image)", onclick: () => this.filePicker.click() },
    paperclipIcon(), h("span", { text: "File" })) : null;
    this.sendButton = h("button", { type: "submit", class: "btn btn-primary send", text: "Send" });
    this.resubmitButton = h("button", { type: "button", class: "btn btn-primary resubmit", text: "Save & submit", hidden: true,
      title: "Save the change and have the agents answer again; their earlier answers stay as versions (Ctrl+Enter)",
      onclick: () => this.submit({ resubmit: true }) });
    this.target = h("span", { class: "composer-target" });
    this.answering = h("span", { class: "composer-answering", id: "composer-answering", "aria-live": "polite" });
    this.hint = h("div", { id: "composer-hint", class: "composer-hint" },
      h("kbd", { text: "Enter" }), " to send · ", h("kbd", { text: "Shift" }), "+", h("kbd", { text: "Enter" }), " new line",
      members().length || onAttach ? " · " : "", members().length || onAttach ? h("kbd", { text: "@" }) : "",
      members().length || onAttach ? " to mention" : "");

    this.form = h("form", { class: "composer", id: "composer", autocomplete: "off", "aria-label": "Write a message" },
      this.banner, files?.element, this.filePicker,
      h("div", { class: "composer-box" },
        h("label", { for: "composer-input", class: "visually-hidden", text: "Message" }),
        this.input, this.mentionList,
        h("div", { class: "composer-tools" }, this.fileButton, this.noteButton, this.attachButton, this.target, this.answering,
          h("span", { class: "spacer" }),
          this.count, this.sendButton, this.resubmitButton)),
      this.error, this.hint);

    this.form.addEventListener("submit", (event) => { event.preventDefault(); this.submit(); });
    this.input.addEventListener("keydown", (event) => this.onKeydown(event));
    this.input.addEventListener("input", () => {
      this.autosize(); this.checkLength(); this.updateMentions(); this.updateAnswering(); this.saveDraft();
    });
    this.input.addEventListener("blur", () => setTimeout(() => this.closeMentions(), 150));
    this.input.addEventListener("paste", (event) => {
      const pasted = [...(event.clipboardData?.files || [])];
      if (!files || !pasted.length || this.editing) return;
      event.preventDefault(); // a pasted screenshot becomes a file, not text
      files.add(pasted);
    });
    if (files) files.onChange = () => this.updateSendButton();
    this.restoreDraft();
    this.updateAnswering();
  }

  get element() { return this.form; }

  focus() { this.input.focus({ preventScroll: true }); }

  setTarget(text) { this.target.textContent = text; }

  autosize() {
    this.input.style.height = "auto";
    this.input.style.height = `${Math.min(this.input.scrollHeight, window.innerHeight * 0.4)}px`;
  }

  // --- Length: told before sending, nothing lost --------------------------------------------
  checkLength() {
    const length = this.input.value.length;
    const limit = this.limits.message_chars;
    const over = length > limit;
    this.count.hidden = length < limit * 0.9;
    this.count.textContent = `${length.toLocaleString()} / ${limit.toLocaleString()}`;
    this.count.classList.toggle("over", over);
    this.input.setAttribute("aria-invalid", over ? "true" : "false");
    const excess = length - limit;
    if (over) this.showError(`Too long to send: ${excess.toLocaleString()} character${excess === 1 ? "" : "s"} over the limit of ${limit.toLocaleString()}. Shorten it; your text is kept.`);
    else if (this.error.dataset.kind === "length") this.showError("");
    if (over) this.error.dataset.kind = "length";
    return !over;
  }

  showError(text) {
    this.error.textContent = text;
    this.error.hidden = !text;
    delete this.error.dataset.kind;
  }

  // --- Modes ---------------------------------------------------------------------------------
  setNoteMode(on) {
    if (!this.noteButton) return;
    this.noteMode = on;
    this.noteButton.setAttribute("aria-pressed", on ? "true" : "false");
    this.form.classList.toggle("note-mode", on);
    this.updatePlaceholder();
    this.focus();
  }

  // Who answers what is written now: the agents it @mentions, else those that answer every
  // message (the server's rule, agents_app.turns.delivery).
  updateAnswering() {
    this.updateSendButton();
    const members = this.members();
    const quiet = !members.length || this.noteMode || this.editing;
    this.answering.hidden = quiet;
    if (quiet) return;
    const who = answeringAgents(members, this.input.value);
    this.answering.classList.toggle("nobody", !who.length);
    this.answering.textContent = who.length ? `· ${who.map((a) => a.name).join(", ")} ${who.length === 1 ? "answers" : "answer"}`
      : "· no agent answers: @mention one";
  }

  updatePlaceholder() {
    this.updateAnswering();
    if (this.editing) this.input.placeholder = "Edit the message";
    else if (this.noteMode) this.input.placeholder = "Write a note for this thread — agents read it, nobody replies";
    else this.input.placeholder = this.basePlaceholder;
    this.updateSendButton();
  }

  // While replies stream in the thread written to and nothing is written, Send is Stop (so is Esc).
  setStopper(stop) {
    this.stopper = stop;
    this.updateSendButton();
  }

  stopShown() {
    return Boolean(this.stopper) && !this.editing && !this.noteMode && !this.input.value.trim() && !this.files?.ids.length;
  }

  canResubmit(message) {
    return Boolean(this.onResubmit) && message?.kind === "message" && message.sender?.type === "user";
  }

  updateSendButton() {
    const resubmit = Boolean(this.editing) && this.canResubmit(this.editing);
    this.resubmitButton.hidden = !resubmit;
    this.sendButton.classList.toggle("btn-primary", !resubmit);
    const stop = this.stopShown();
    this.sendButton.textContent = this.editing ? "Save" : this.noteMode ? "Add note" : stop ? "Stop" : "Send";
    this.sendButton.classList.toggle("stop-replies", stop);
    this.sendButton.title = stop ? "Stop the replies (Esc)" : "";
  }

  startEdit(message, text) {
    if (!this.editing) this.draftBeforeEdit = this.input.value;
    this.editing = message;
    this.banner.replaceChildren(h("span", { text: `Editing ${message.kind === "note" ? "a note" : "a message"}` }),
      h("span", { class: "muted", text: this.canResubmit(message) ? " · Esc to cancel · Ctrl+Enter to save and submit" : " · Esc to cancel" }),
      h("button", { type: "button", class: "btn-ghost btn-small", text: "Cancel", onclick: () => this.cancelEdit() }));
    this.banner.hidden = false;
    this.form.classList.add("editing");
    this.input.value = text;
    this.updatePlaceholder();
    this.autosize();
    this.checkLength();
    this.focus();
    this.input.setSelectionRange(text.length, text.length);
  }

  cancelEdit() {
    if (!this.editing) return;
    this.editing = null;
    this.banner.hidden = true;
    this.form.classList.remove("editing");
    this.input.value = this.draftBeforeEdit || "";
    this.updatePlaceholder();
    this.autosize();
    this.checkLength();
    this.focus();
  }

  // Put text back into the composer (a failed send the user wants to change).
  recall(text) {
    this.input.value = this.input.value ? `${this.input.value}\n${text}` : text;
    this.updateAnswering();
    this.autosize();
    this.checkLength();
    this.saveDraft();
    this.focus();
  }

  submit({ resubmit = false } = {}) {
    this.closeMentions();
    if (this.stopShown()) { this.stopper(); return; }
    const content = this.input.value;
    const fileIds = this.editing ? [] : this.files?.ids || [];
    if (!content.trim() && !fileIds.length) { this.focus(); return; }
    if (!this.checkLength()) { this.focus(); return; }
    if (!this.editing && this.files?.busy) {
      this.showError("A file is still uploading: it is sent with the message once it is up.");
      this.focus();
      return;
    }
    if (this.editing) {
      const message = this.editing;
      this.editing = null;
      this.banner.hidden = true;
      this.form.classList.remove("editing");
      this.input.value = this.draftBeforeEdit || "";
      this.updatePlaceholder();
      if (resubmit && this.canResubmit(message)) this.onResubmit(message, content);
      else this.onSaveEdit(message, content);
    } else {
      const accepted = this.onSend(content, this.noteMode ? "note" : "message", fileIds);
      if (accepted === false) return;
      this.input.value = "";
      this.files?.clear();
      this.showError("");
      if (this.noteMode) this.setNoteMode(false);
    }
    this.autosize();
    this.checkLength();
    this.updateAnswering();
    this.saveDraft();
    this.focus();
  }

  onKeydown(event) {
    if (this.mention && this.mentionKeys(event)) return;
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      this.submit({ resubmit: event.ctrlKey || event.metaKey });
    } else if (event.key === "Escape") {
      if (this.editing) { event.preventDefault(); this.cancelEdit(); } else if (this.noteMode) { event.preventDefault(); this.setNoteMode(false); }
      else if (this.stopShown()) { event.preventDefault(); this.stopper(); }
    } else if (event.altKey && (event.key === "n" || event.key === "N") && this.noteButton) {
      event.preventDefault();
      this.setNoteMode(!this.noteMode);
    }
  }

  // --- @mentions -----------------------------------------------------------------------------
  updateMentions() {
    const before = this.input.value.slice(0, this.input.selectionStart);
    const match = /(?:^|\s)@([^\s@]*)$/.exec(before);
    const agents = this.members();
    if (!match || !agents.length) { this.closeMentions(); return; }
    const query = match[1].toLowerCase();
    const found = agents.filter((a) => a.name.toLowerCase().startsWith(query)).slice(0, 8);
    if (!found.length) { this.closeMentions(); return; }
    this.mention = { start: before.length - match[1].length - 1, end: before.length, found, index: 0 };
    this.renderMentions();
  }

  renderMentions() {
    const { found, index } = this.mention;
    this.mentionList.replaceChildren(...found.map((agent, i) => h("li", {
      id: `mention-${i}`, role: "option", class: "mention-option", "aria-selected": i === index ? "true" : "false",
      onmousedown: (event) => { event.preventDefault(); this.pickMention(i); },
    }, h("span", { class: "mention-avatar", "aria-hidden": "true", text: agent.avatar || "" }), h("span", { text: agent.name }))));
    this.mentionList.hidden = false;
    this.input.setAttribute("aria-expanded", "true");
    this.input.setAttribute("aria-activedescendant", `mention-${index}`);
  }

  mentionKeys(event) {
    const count = this.mention.found.length;
    if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      event.preventDefault();
      this.mention.index = (this.mention.index + (event.key === "ArrowDown" ? 1 : count - 1)) % count;
      this.renderMentions();
      return true;
    }
    if (event.key === "Enter" || event.key === "Tab") {
      event.preventDefault();
      this.pickMention(this.mention.index);
      return true;
    }
    if (event.key === "Escape") { event.preventDefault(); this.closeMentions(); return true; }
    return false;
  }

  pickMention(index) {
    const agent = this.mention.found[index];
    const { start, end } = this.mention;
    const value = this.input.value;
    const insert = `@${agent.name} `;
    this.input.value = value.slice(0, start) + insert + value.slice(end);
    const caret = start + insert.length;
    this.input.setSelectionRange(caret, caret);
    this.closeMentions();
    this.saveDraft();
    this.focus();
  }

  // Insert "@Name " at the caret (the member menu's "Mention").
  recallMention(agent) {
    const at = this.input.selectionStart ?? this.input.value.length;
    const value = this.input.value;
    const space = at > 0 && !/\s$/.test(value.slice(0, at)) ? " " : "";
    const insert = `${space}@${agent.name} `;
    this.input.value = value.slice(0, at) + insert + value.slice(at);
    this.input.setSelectionRange(at + insert.length, at + insert.length);
    this.saveDraft();
    this.focus();
  }

  closeMentions() {
    this.mention = null;
    this.mentionList.hidden = true;
    this.input.setAttribute("aria-expanded", "false");
    this.input.removeAttribute("aria-activedescendant");
  }

  // --- Drafts --------------------------------------------------------------------------------
  saveDraft() {
    if (!this.draftKey || this.editing) return;
    try {
      if (this.input.value) localStorage.setItem(this.draftKey, this.input.value);
      else localStorage.removeItem(this.draftKey);
    } catch { /* storage may be full or off; the text stays in the box */ }
  }

  restoreDraft() {
    if (!this.draftKey) return;
    try {
      const draft = localStorage.getItem(this.draftKey);
      if (draft) { this.input.value = draft; queueMicrotask(() => { this.autosize(); this.checkLength(); }); }
    } catch { /* no storage: nothing to restore */ }
  }

  setDisabled(disabled, reason = "") {
    this.input.disabled = disabled;
    this.sendButton.disabled = disabled;
    if (this.noteButton) this.noteButton.disabled = disabled;
    if (this.attachButton) this.attachButton.disabled = disabled;
    if (this.fileButton) this.fileButton.disabled = disabled;
    if (reason) this.showError(reason);
  }
}

