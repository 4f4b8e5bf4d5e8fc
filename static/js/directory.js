// The sidebar: the user's chats, live (directory.updated events), grouped by day, with search,
// rename in place, delete to the trash, and the trash with restore.

import { getJSON, postJSON } from "./net.js";
import { chatAvatar, fullTime, h, icon, relativeTime, shortTime, showMenu, snippet, temporaryLabel, temporaryMark, toast } from "./ui.js";

function dayGroup(iso, now = new Date()) {
  const then = new Date(iso);
  const startOfToday = new Date(now.getFullYear(), now.getMonth(), now.getDate()).getTime();
  const day = 24 * 3600 * 1000;
  if (then.getTime() >= startOfToday) return "Today";
  if (then.getTime() >= startOfToday - day) return "Yesterday";
  if (then.getTime() >= startOfToday - 7 * day) return "Previous 7 days";
  if (then.getTime() >= startOfToday - 30 * day) return "Previous 30 days";
  return "Older";
}

// A search snippet's [[matched words]] as <mark>s; the rest stays text.
function markedSnippet(text) {
  return String(text || "").split(/\[\[(.*?)\]\]/).map((part, i) => (i % 2 ? h("mark", { text: part }) : part));
}

function matches(chat, query) {
  const text = `${chat.title} ${chat.description || ""}`.toLowerCase();
  return query.toLowerCase().split(/\s+/).filter(Boolean).every((word) => text.includes(word));
}

export class Directory {
  constructor({ app, initial }) {
    this.app = app;
    this.chats = initial.chats;
    this.hits = []; // messages that match the search, under the chats that do
    this.cursor = initial.next_cursor;
    this.query = "";
    this.trash = false;
    this.activeId = null;
    this.renaming = null;
    this.list = h("ul", { class: "directory", id: "directory", "aria-label": "Your chats" });
    this.more = h("button", { type: "button", class: "btn-ghost btn-small load-more", text: "Show more",
      onclick: () => this.loadMore() });
    this.search = h("input", { type: "search", id: "directory-search", class: "search-input", placeholder: "Search chats",
      autocomplete: "off", "aria-describedby": "search-hint" });
    this.search.addEventListener("input", () => {
      clearTimeout(this.searchTimer);
      this.searchTimer = setTimeout(() => this.reload(), 180);
    });
    this.search.addEventListener("keydown", (event) => {
      if (event.key === "Escape" && this.search.value) { event.preventDefault(); this.search.value = ""; this.reload(); }
      if (event.key === "ArrowDown") { event.preventDefault(); this.list.querySelector("a.dir-link")?.focus(); }
    });
    this.trashButton = h("button", { type: "button", class: "btn-ghost btn-small trash-toggle", "aria-pressed": "false",
      onclick: () => this.toggleTrash() }, icon("trash"), h("span", { text: "Trash" }));
    this.heading = h("div", { class: "directory-heading", hidden: true });
    this.element = h("nav", { class: "directory-wrap", "aria-label": "Chats" },
      h("div", { class: "search" }, h("label", { for: "directory-search", class: "visually-hidden", text: "Search chats" }), this.search,
        h("span", { id: "search-hint", class: "visually-hidden", text: "Searches chat titles and every message as you type" })),
      this.heading, this.list, this.more);
    this.list.addEventListener("keydown", (event) => this.onListKeys(event));
    this.render();
  }

  setActive(chatId) {
    this.activeId = chatId;
    for (const link of this.list.querySelectorAll("a.dir-link")) {
      if (link.dataset.chatId === chatId) link.setAttribute("aria-current", "page");
      else link.removeAttribute("aria-current");
      link.closest("li").classList.toggle("active", link.dataset.chatId === chatId);
    }
  }

  render() {
    const items = [];
    let group = null;
    if (!this.chats.length && !this.hits.length) {
      const text = this.trash ? "The trash is empty." : this.query ? `Nothing matches “${this.query}”.` : "No chats yet. Start one with New chat.";
      items.push(h("li", { class: "dir-empty", text }));
    }
    if (this.query && !this.trash && this.chats.length) items.push(h("li", { class: "dir-group", "aria-hidden": "true", text: "Chats" }));
    for (const chat of this.chats) {
      const label = this.trash || this.query ? null : dayGroup(chat.updated_at);
      if (label && label !== group) {
        group = label;
        items.push(h("li", { class: "dir-group", "aria-hidden": "true", text: label }));
      }
      items.push(this.trash ? this.trashItem(chat) : this.item(chat));
    }
    if (this.hits.length) {
      items.push(h("li", { class: "dir-group", "aria-hidden": "true", text: "Messages" }));
      items.push(...this.hits.map((hit) => this.hitItem(hit)));
    }
    this.list.replaceChildren(...items);
    this.more.hidden = !this.cursor;
    this.heading.hidden = !this.trash;
    this.heading.replaceChildren(h("span", {}, h("strong", { text: "Trash" }),
      h("span", { class: "muted", text: ` · chats stay ${this.app.limits.trash_days} days` })),
    h("button", { type: "button", class: "btn-ghost btn-small", text: "Done", onclick: () => this.toggleTrash() }));
    this.setActive(this.activeId);
  }

  item(chat) {
    if (this.renaming === chat.id) return this.renameItem(chat);
    const link = h("a", { class: "dir-link", href: `/chats/${chat.id}/`, title: chat.title, dataset: { chatId: chat.id } },
      chatAvatar(chat, "sm"),
      h("span", { class: "dir-text" },
        h("span", { class: "dir-title" }, chat.kind === "temporary" ? temporaryMark() : null, chat.title),
        chat.kind === "temporary"
          ? h("span", { class: "dir-preview dir-temporary", text: temporaryLabel(chat) })
          : h("span", { class: "dir-preview", text: snippet(chat.last_message_preview, 80) || "No messages yet" })),
      h("time", { class: "dir-time", datetime: chat.updated_at, title: fullTime(chat.updated_at), dataset: { short: "" },
        text: shortTime(chat.updated_at) }));
    link.addEventListener("click", (event) => {
      if (event.metaKey || event.ctrlKey || event.shiftKey || event.button !== 0) return;
      event.preventDefault();
      this.app.navigate(chat.id);
    });
    const menu = h("button", { type: "button", class: "btn-icon dir-menu", "aria-haspopup": "menu", "aria-expanded": "false",
      "aria-label": `Actions for ${chat.title}`, text: "⋯" });
    menu.addEventListener("click", () => showMenu(menu, [
      { label: "Rename", onSelect: () => this.startRename(chat) },
      ...(chat.kind === "temporary" ? [{ label: "Save this chat", onSelect: () => this.app.saveChat(chat) }] : []),
      { label: "Delete", danger: true, onSelect: () => this.app.deleteChat(chat) },
    ]));
    return h("li", { class: "dir-item", dataset: { chatId: chat.id } }, link, menu);
  }

  hitItem(hit) {
    const link = h("a", { class: "dir-link dir-hit-link", href: `/chats/${hit.chat_id}/#message-${hit.message_id}`,
      dataset: { chatId: hit.chat_id, messageId: String(hit.message_id) } },
    h("span", { class: "dir-text" },
      h("span", { class: "dir-title", text: hit.chat_title }),
      h("span", { class: "dir-preview" }, ...markedSnippet(hit.snippet))),
    hit.created_at ? h("time", { class: "dir-time", datetime: hit.created_at, title: fullTime(hit.created_at),
      dataset: { short: "" }, text: shortTime(hit.created_at) }) : null);
    link.addEventListener("click", (event) => {
      if (event.metaKey || event.ctrlKey || event.shiftKey || event.button !== 0) return;
      event.preventDefault();
      this.app.navigate(hit.chat_id, { messageId: hit.message_id });
    });
    return h("li", { class: "dir-item dir-hit" }, link);
  }

  renameItem(chat) {
    const input = h("input", { type: "text", class: "rename-input", value: chat.title, maxlength: this.app.limits.title_chars,
      "aria-label": `New title for ${chat.title}` });
    const finish = async (save) => {
      if (this.renaming !== chat.id) return;
      this.renaming = null;
      const title = input.value.trim();
      if (save && title && title !== chat.title) {
        try {
          const answer = await postJSON(`/chats/${chat.id}/settings/`, { title });
          this.upsert(answer.chat);
        } catch (error) {
          toast(`Could not rename: ${error.message}`, { kind: "error" });
        }
      }
      this.render();
      this.list.querySelector(`a[data-chat-id="${chat.id}"]`)?.focus();
    };
    input.addEventListener("keydown", (event) => {
      if (event.key === "Enter") { event.preventDefault(); finish(true); }
      if (event.key === "Escape") { event.preventDefault(); finish(false); }
    });
    input.addEventListener("blur", () => finish(true));
    queueMicrotask(() => { input.focus(); input.select(); });
    return h("li", { class: "dir-item renaming", dataset: { chatId: chat.id } }, input);
  }

  startRename(chat) {
    this.renaming = chat.id;
    this.render();
  }

  trashItem(chat) {
    return h("li", { class: "dir-item trashed", dataset: { chatId: chat.id } },
      h("div", { class: "dir-link" }, chatAvatar(chat, "sm"),
        h("span", { class: "dir-text" }, h("span", { class: "dir-title", text: chat.title }),
          h("span", { class: "dir-preview", text: `Deleted ${relativeTime(chat.deleted_at)}` }))),
      h("button", { type: "button", class: "btn btn-small", text: "Restore", "aria-label": `Restore ${chat.title}`,
        onclick: () => this.app.restoreChat(chat) }));
  }

  // Keyboard: arrows move between chats in the list.
  onListKeys(event) {
    if (event.key !== "ArrowDown" && event.key !== "ArrowUp") return;
    const links = [...this.list.querySelectorAll("a.dir-link")];
    const index = links.indexOf(document.activeElement);
    if (index < 0) return;
    event.preventDefault();
    if (event.key === "ArrowUp" && index === 0) { this.search.focus(); return; }
    links[Math.min(links.length - 1, Math.max(0, index + (event.key === "ArrowDown" ? 1 : -1)))].focus();
  }

  async reload() {
    this.query = this.search.value.trim();
    const params = new URLSearchParams({ q: this.query });
    if (this.trash) params.set("trash", "1");
    try {
      const [page, found] = await Promise.all([getJSON(`/directory/?${params}`),
        this.query && !this.trash ? getJSON(`/search/?${new URLSearchParams({ q: this.query })}`) : { messages: [] }]);
      if (this.query !== this.search.value.trim()) return; // a newer search is under way
      this.chats = page.chats;
      this.hits = found.messages.filter((hit) => hit.message_id);
      this.cursor = page.next_cursor;
      this.render();
    } catch (error) {
      toast(`Could not load your chats: ${error.message}`, { kind: "error" });
    }
  }

  async loadMore() {
    const params = new URLSearchParams({ q: this.query, before: this.cursor });
    if (this.trash) params.set("trash", "1");
    try {
      const page = await getJSON(`/directory/?${params}`);
      const known = new Set(this.chats.map((c) => c.id));
      this.chats.push(...page.chats.filter((c) => !known.has(c.id)));
      this.cursor = page.next_cursor;
      this.render();
    } catch (error) {
      toast(`Could not load more chats: ${error.message}`, { kind: "error" });
    }
  }

  toggleTrash() {
    this.trash = !this.trash;
    this.trashButton.setAttribute("aria-pressed", String(this.trash));
    this.search.placeholder = this.trash ? "Search the trash" : "Search chats";
    this.reload();
  }

  upsert(chat) {
    const index = this.chats.findIndex((c) => c.id === chat.id);
    if (index >= 0) this.chats.splice(index, 1);
    // A deleted or expired temporary chat is gone, not in the trash.
    const belongs = this.trash ? Boolean(chat.deleted_at) && chat.kind !== "temporary" : !chat.deleted_at;
    if (belongs && (!this.query || matches(chat, this.query))) {
      this.chats.push(chat);
      this.chats.sort((a, b) => (a.updated_at < b.updated_at ? 1 : a.updated_at > b.updated_at ? -1 : 0));
    }
  }

  // directory.updated: created, renamed, deleted, restored, touched.
  onEvent(event) {
    if (this.renaming === event.chat.id) return;
    this.upsert(event.chat);
    this.render();
  }
}
