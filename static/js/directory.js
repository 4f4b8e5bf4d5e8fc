// The sidebar: the user's chats, live (directory.updated events), pinned ones first, the rest
// grouped by day, with search, rename in place, delete to the trash, and the trash with restore;
// folders (organize.js) and a tag filter narrow the list; the archive lists archived chats.

import { getJSON, postJSON } from "./net.js";
import { CHAT_DRAG_TYPE, FolderList, askText, organize, organizeIcon } from "./organize.js";
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

// Newest first, pinned chats (most recently pinned first) ahead of the rest; the archive by when.
function byPlace(archive) {
  const key = (c) => (archive ? [c.archived_at || "", ""] : [c.pinned_at ? "1" : "0", c.pinned_at || c.updated_at]);
  return (a, b) => {
    const [x, y] = [key(a), key(b)];
    return x[0] !== y[0] ? (x[0] < y[0] ? 1 : -1) : x[1] < y[1] ? 1 : x[1] > y[1] ? -1 : 0;
  };
}

export class Directory {
  constructor({ app, initial, folders = [] }) {
    this.app = app;
    this.chats = initial.chats;
    this.archive = false;
    this.folderId = null;
    this.tag = null;
    this.folderList = new FolderList({ directory: this, folders });
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
    this.archiveButton = h("button", { type: "button", class: "btn-ghost btn-small trash-toggle archive-toggle",
      "aria-pressed": "false", onclick: () => this.toggleArchive() }, organizeIcon("archive"), h("span", { text: "Archive" }));
    this.heading = h("div", { class: "directory-heading", hidden: true });
    this.element = h("nav", { class: "directory-wrap", "aria-label": "Chats" },
      h("div", { class: "search" }, h("label", { for: "directory-search", class: "visually-hidden", text: "Search chats" }), this.search,
        h("span", { id: "search-hint", class: "visually-hidden", text: "Searches chat titles and every message as you type" })),
      this.folderList.element, this.heading, this.list, this.more);
    this.list.addEventListener("keydown", (event) => this.onListKeys(event));
    this.folderList.render();
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

  emptyText() {
    if (this.query) return `Nothing matches “${this.query}”.`;
    if (this.trash) return "The trash is empty.";
    if (this.archive) return "No archived chats. Archive a chat from its menu to keep it out of the list.";
    if (this.folderId) return "No chats in this folder yet. Drag a chat here, or use its menu's Move to folder.";
    if (this.tag) return `No chats tagged “${this.tag}”.`;
    return "No chats yet. Start one with New chat.";
  }

  render() {
    const items = [];
    let group = null;
    if (!this.chats.length && !this.hits.length) items.push(h("li", { class: "dir-empty", text: this.emptyText() }));
    if (this.query && !this.trash && this.chats.length) items.push(h("li", { class: "dir-group", "aria-hidden": "true", text: "Chats" }));
    const plain = this.trash || this.archive;
    for (const chat of this.chats) {
      const label = plain || this.query ? null : chat.pinned_at ? "Pinned" : dayGroup(chat.updated_at);
      if (label && label !== group) {
        group = label;
        items.push(h("li", { class: "dir-group", "aria-hidden": "true", text: label }));
      }
      items.push(this.trash ? this.trashItem(chat) : this.archive ? this.archiveItem(chat) : this.item(chat));
    }
    if (this.hits.length) {
      items.push(h("li", { class: "dir-group", "aria-hidden": "true", text: "Messages" }));
      items.push(...this.hits.map((hit) => this.hitItem(hit)));
    }
    this.list.replaceChildren(...items);
    this.more.hidden = !this.cursor;
    this.renderHeading();
    this.setActive(this.activeId);
  }

  // What the list shows, above it: the trash, the archive, a folder or a tag, with the way back.
  renderHeading() {
    const folder = this.folderId ? this.folderList.byId(this.folderId) : null;
    let title = null;
    let note = "";
    if (this.trash) [title, note] = ["Trash", ` · chats stay ${this.app.limits.trash_days} days`];
    else if (this.archive) [title, note] = ["Archive", " · still found by search"];
    else if (folder) [title, note] = [folder.name, folder.instructions ? " · with instructions" : ""];
    else if (this.tag) [title, note] = [`Tag: ${this.tag}`, ""];
    this.heading.hidden = !title;
    if (!title) { this.heading.replaceChildren(); return; }
    const done = () => (this.trash ? this.toggleTrash() : this.archive ? this.toggleArchive() : this.clearFilters());
    this.heading.replaceChildren(h("span", { class: "heading-text" }, h("strong", { text: title }), h("span", { class: "muted", text: note })),
      h("button", { type: "button", class: "btn-ghost btn-small", text: "Done", onclick: done }));
  }

  item(chat) {
    if (this.renaming === chat.id) return this.renameItem(chat);
    const link = h("a", { class: "dir-link", href: `/chats/${chat.id}/`, title: chat.title, dataset: { chatId: chat.id } },
      chatAvatar(chat, "sm"),
      h("span", { class: "dir-text" },
        h("span", { class: "dir-title" }, chat.kind === "temporary" ? temporaryMark() : null,
          chat.pinned_at ? h("span", { class: "dir-pin", title: "Pinned" }, organizeIcon("pin"), h("span", { class: "visually-hidden", text: "Pinned: " })) : null,
          chat.title),
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
    menu.addEventListener("click", () => showMenu(menu, this.menuItems(chat, menu)));
    const item = h("li", { class: "dir-item", dataset: { chatId: chat.id } }, link, menu, this.tagChips(chat));
    if (chat.kind !== "temporary") {
      item.draggable = true;
      item.addEventListener("dragstart", (event) => {
        event.dataTransfer.setData(CHAT_DRAG_TYPE, chat.id);
        event.dataTransfer.effectAllowed = "move";
        this.element.classList.add("dragging-chat");
      });
      item.addEventListener("dragend", () => this.element.classList.remove("dragging-chat"));
    }
    return item;
  }

  menuItems(chat, menu) {
    const stored = chat.kind !== "temporary";
    const tags = chat.tags || [];
    return [
      { label: "Rename", onSelect: () => this.startRename(chat) },
      ...(stored ? [
        { label: chat.pinned_at ? "Unpin" : "Pin", onSelect: () => this.organizeChat(chat, { pinned: !chat.pinned_at }) },
        { label: "Move to folder…", onSelect: () => setTimeout(() => showMenu(menu, this.folderChoices(chat))) },
        { label: "Add tag…", onSelect: () => this.askTag(chat) },
        ...tags.map((tag) => ({ label: `Remove tag “${tag}”`, onSelect: () => this.untag(chat, tag) })),
        { label: "Archive", onSelect: () => this.organizeChat(chat, { archived: true }) },
      ] : [{ label: "Save this chat", onSelect: () => this.app.saveChat(chat) }]),
      { label: "Delete", danger: true, onSelect: () => this.app.deleteChat(chat) },
    ];
  }

  folderChoices(chat) {
    const folders = this.folderList.folders;
    return [
      ...folders.map((f) => ({ label: f.id === chat.folder_id ? `✓ ${f.name}` : f.name, disabled: f.id === chat.folder_id,
        onSelect: () => this.moveChat(chat.id, f.id) })),
      ...(chat.folder_id ? [{ label: "Out of its folder", onSelect: () => this.moveChat(chat.id, null) }] : []),
      ...(folders.length ? [{ separator: true }] : []),
      { label: "New folder…", onSelect: () => this.folderList.create({ thenMove: chat.id }) },
    ];
  }

  tagChips(chat) {
    const tags = chat.tags || [];
    if (!tags.length) return null;
    return h("div", { class: "dir-tags" }, ...tags.map((tag) => h("button", { type: "button",
      class: `dir-tag${tag === this.tag ? " active" : ""}`, text: tag, title: `Show the chats tagged “${tag}”`,
      "aria-pressed": String(tag === this.tag), onclick: () => this.filterTag(tag === this.tag ? null : tag) })));
  }

  async organizeChat(chat, fields) {
    try {
      const answer = await organize.chat(chat.id, fields);
      this.upsert(answer.chat);
      this.render();
      if (fields.archived) toast(`Archived “${chat.title}”.`, { action: "Undo", onAction: () => this.organizeChat(chat, { archived: false }) });
      if (fields.archived === false) toast(`Restored “${chat.title}” from the archive.`);
    } catch (error) {
      toast(`Could not change “${chat.title}”: ${error.message}`, { kind: "error" });
    }
  }

  async moveChat(chatId, folderId) {
    const chat = this.chats.find((c) => c.id === chatId);
    try {
      const answer = await organize.chat(chatId, { folder_id: folderId });
      this.upsert(answer.chat);
      this.render();
      const folder = folderId ? this.folderList.byId(folderId) : null;
      toast(folder ? `Moved “${answer.chat.title}” to ${folder.name}.` : `Took “${answer.chat.title}” out of its folder.`);
    } catch (error) {
      toast(`Could not move “${chat?.title || "the chat"}”: ${error.message}`, { kind: "error" });
    }
  }

  askTag(chat) {
    askText({ title: `Tag “${chat.title}”`, label: "Tag", maxLength: 50, field: "tags", submit: "Add tag",
      onSubmit: async (name) => {
        this.upsert((await organize.addTag(chat.id, name)).chat);
        this.render();
      } });
  }

  async untag(chat, tag) {
    try {
      this.upsert((await organize.removeTag(chat.id, tag)).chat);
      this.render();
    } catch (error) {
      toast(`Could not remove the tag: ${error.message}`, { kind: "error" });
    }
  }

  archiveItem(chat) {
    const link = h("a", { class: "dir-link", href: `/chats/${chat.id}/`, title: chat.title, dataset: { chatId: chat.id } },
      chatAvatar(chat, "sm"),
      h("span", { class: "dir-text" }, h("span", { class: "dir-title", text: chat.title }),
        h("span", { class: "dir-preview", text: `Archived ${relativeTime(chat.archived_at)}` })));
    link.addEventListener("click", (event) => {
      if (event.metaKey || event.ctrlKey || event.shiftKey || event.button !== 0) return;
      event.preventDefault();
      this.app.navigate(chat.id);
    });
    return h("li", { class: "dir-item archived", dataset: { chatId: chat.id } }, link,
      h("button", { type: "button", class: "btn btn-small", text: "Restore", "aria-label": `Restore ${chat.title} from the archive`,
        onclick: () => this.organizeChat(chat, { archived: false }) }));
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

  params(extra = {}) {
    const params = new URLSearchParams({ q: this.query, ...extra });
    if (this.trash) params.set("trash", "1");
    else if (this.archive) params.set("archived", "1");
    if (this.folderId) params.set("folder", String(this.folderId));
    if (this.tag) params.set("tag", this.tag);
    return params;
  }

  async reload() {
    this.query = this.search.value.trim();
    const params = this.params();
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
    const params = this.params({ before: this.cursor });
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

  // The list shows one of: the chats, the trash, the archive; a folder or a tag narrows the chats.
  showList({ trash = false, archive = false, folderId = null, tag = null } = {}) {
    [this.trash, this.archive, this.folderId, this.tag] = [trash, archive, folderId, tag];
    this.trashButton.setAttribute("aria-pressed", String(trash));
    this.archiveButton.setAttribute("aria-pressed", String(archive));
    this.search.placeholder = trash ? "Search the trash" : archive ? "Search the archive" : "Search chats";
    this.folderList.render();
    this.renderHeading();
    this.reload();
  }

  toggleTrash() {
    this.showList({ trash: !this.trash });
  }

  toggleArchive() {
    this.showList({ archive: !this.archive });
  }

  openFolder(folderId) {
    this.showList({ folderId });
  }

  filterTag(tag) {
    this.showList({ tag });
  }

  clearFilters() {
    this.showList();
  }

  belongs(chat) {
    // A deleted or expired temporary chat is gone, not in the trash.
    if (this.trash) return Boolean(chat.deleted_at) && chat.kind !== "temporary";
    if (chat.deleted_at) return false;
    if (this.archive) return Boolean(chat.archived_at);
    if (chat.archived_at) return false;
    if (this.folderId && chat.folder_id !== this.folderId) return false;
    if (this.tag && !(chat.tags || []).includes(this.tag)) return false;
    return true;
  }

  upsert(chat) {
    const index = this.chats.findIndex((c) => c.id === chat.id);
    const known = index >= 0 ? this.chats[index] : null;
    if (index >= 0) this.chats.splice(index, 1);
    // An event that leaves the tags out did not change them.
    if (!("tags" in chat)) chat = { ...chat, tags: known?.tags || [] };
    if (this.belongs(chat) && (!this.query || matches(chat, this.query))) {
      this.chats.push(chat);
      this.chats.sort(byPlace(this.archive));
    }
  }

  // folder.updated (deleted): its chats are in no folder now; a list of it goes back to all chats.
  onFolderDeleted(folderId) {
    for (const chat of this.chats) if (chat.folder_id === folderId) chat.folder_id = null;
    if (this.folderId === folderId) this.clearFilters();
    else this.render();
  }

  // directory.updated: created, renamed, deleted, restored, touched, pinned, unpinned, archived,
  // unarchived, moved, tagged.
  onEvent(event) {
    if (this.renaming === event.chat.id) return;
    this.upsert(event.chat);
    this.render();
  }
}
