// Keeping chats in order from the sidebar: the folder list (open a folder to see its chats, drop a
// chat on one, rename it, give it instructions, delete it), the requests that pin, archive, file
// and tag a chat, and the small dialog that asks for a name or a folder's instructions.

import { postJSON } from "./net.js";
import { h, lineIcon, showMenu, toast } from "./ui.js";

// What a dragged chat row carries.
export const CHAT_DRAG_TYPE = "application/x-hub-chat";

const ICONS = {
  folder: "M2 4.5a1 1 0 0 1 1-1h3.2l1.3 1.5H13a1 1 0 0 1 1 1v6a1 1 0 0 1-1 1H3a1 1 0 0 1-1-1z",
  pin: "M6 2h4M7 2v4L4.5 8.5h7L9 6V2M8 8.5V14",
  archive: "M2 3h12v3H2zM3 6v7h10V6M6.5 8.5h3",
};

export function organizeIcon(name) {
  return lineIcon(ICONS[name], { cls: `icon icon-${name}` });
}

export const organize = {
  chat: (chatId, fields) => postJSON(`/chats/${chatId}/organize/`, fields),
  addTag: (chatId, name) => postJSON(`/chats/${chatId}/tags/`, { name }),
  removeTag: (chatId, name) => postJSON(`/chats/${chatId}/tags/remove/`, { name }),
  createFolder: (fields) => postJSON("/folders/", fields),
  updateFolder: (folderId, fields) => postJSON(`/folders/${folderId}/`, fields),
  deleteFolder: (folderId) => postJSON(`/folders/${folderId}/delete/`),
};

let dialogCount = 0;

// A dialog asking for one text. onSubmit(value) may throw a HubRequestError: its message (or its
// field's) shows under the input and the dialog stays open.
export function askText({ title, label, value = "", multiline = false, maxLength, field = "name", submit = "Save",
  hint = "", onSubmit }) {
  const id = `ask-${++dialogCount}`;
  const input = multiline
    ? h("textarea", { id: `${id}-input`, rows: "8", maxlength: maxLength, class: "ask-textarea" })
    : h("input", { type: "text", id: `${id}-input`, maxlength: maxLength, autocomplete: "off" });
  input.value = value;
  const error = h("div", { class: "field-error", id: `${id}-error`, role: "alert" });
  input.setAttribute("aria-describedby", `${id}-error`);
  const form = h("form", { method: "dialog", class: "dialog-form" },
    h("h2", { id: `${id}-title`, text: title }),
    h("div", { class: "field" }, h("label", { for: `${id}-input`, text: label }), input,
      hint ? h("p", { class: "muted field-hint", text: hint }) : null, error),
    h("div", { class: "dialog-actions" },
      h("button", { type: "button", class: "btn btn-ghost", text: "Cancel", onclick: () => dialog.close() }),
      h("button", { type: "submit", class: "btn btn-primary", text: submit })));
  const dialog = h("dialog", { class: "dialog ask-dialog", "aria-labelledby": `${id}-title` }, form);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const button = form.querySelector("button[type=submit]");
    button.disabled = true;
    try {
      await onSubmit(multiline ? input.value : input.value.trim());
      dialog.close();
    } catch (failure) {
      error.textContent = failure.fields?.[field]?.join(" ") || failure.message;
      input.setAttribute("aria-invalid", "true");
      input.focus();
    } finally {
      button.disabled = false;
    }
  });
  dialog.addEventListener("close", () => dialog.remove());
  document.body.append(dialog);
  dialog.showModal();
  input.focus();
  if (!multiline) input.select();
  return dialog;
}

// The sidebar's folders: "All chats" and each folder as a filter of the directory below.
export class FolderList {
  constructor({ directory, folders }) {
    this.directory = directory;
    this.folders = folders;
    this.list = h("ul", { class: "folder-list", "aria-label": "Folders" });
    this.element = h("section", { class: "folders", "aria-labelledby": "folders-heading" },
      h("div", { class: "folders-head" }, h("h2", { id: "folders-heading", class: "folders-title", text: "Folders" }),
        h("button", { type: "button", class: "btn-ghost btn-small new-folder", text: "+ New folder",
          onclick: () => this.create() })),
      this.list);
  }

  byId(id) {
    return this.folders.find((f) => f.id === id);
  }

  render() {
    const active = this.directory.folderId;
    const items = this.folders.map((folder) => this.item(folder, folder.id === active));
    if (!items.length) items.push(h("li", { class: "folder-empty muted", text: "No folders yet. Drag a chat onto one to file it." }));
    this.list.replaceChildren(...items);
  }

  item(folder, active) {
    const open = h("button", { type: "button", class: "folder-link", "aria-pressed": String(active),
      title: folder.instructions ? `${folder.name}: has instructions for its agents` : folder.name,
      onclick: () => this.directory.openFolder(active ? null : folder.id) },
    organizeIcon("folder"), h("span", { class: "folder-name", text: folder.name }),
    folder.instructions ? h("span", { class: "folder-has-instructions", title: "Has instructions", "aria-label": "has instructions", text: "✦" }) : null);
    const menu = h("button", { type: "button", class: "btn-icon dir-menu folder-menu", "aria-haspopup": "menu",
      "aria-expanded": "false", "aria-label": `Actions for the folder ${folder.name}`, text: "⋯" });
    menu.addEventListener("click", () => showMenu(menu, [
      { label: "Rename", onSelect: () => this.rename(folder) },
      { label: "Instructions…", onSelect: () => this.editInstructions(folder) },
      { label: "Delete folder", danger: true, onSelect: () => this.remove(folder) },
    ]));
    const item = h("li", { class: `folder-item${active ? " active" : ""}`, dataset: { folderId: String(folder.id) } }, open, menu);
    // A chat dropped here goes into the folder.
    item.addEventListener("dragover", (event) => {
      if (!event.dataTransfer.types.includes(CHAT_DRAG_TYPE)) return;
      event.preventDefault();
      event.dataTransfer.dropEffect = "move";
      item.classList.add("drop-target");
    });
    item.addEventListener("dragleave", () => item.classList.remove("drop-target"));
    item.addEventListener("drop", (event) => {
      item.classList.remove("drop-target");
      const chatId = event.dataTransfer.getData(CHAT_DRAG_TYPE);
      if (!chatId) return;
      event.preventDefault();
      this.directory.moveChat(chatId, folder.id);
    });
    return item;
  }

  create({ thenMove = null } = {}) {
    askText({ title: "New folder", label: "Name", maxLength: 100, submit: "Create", onSubmit: async (name) => {
      const answer = await organize.createFolder({ name });
      this.upsert(answer.folder);
      if (thenMove) await this.directory.moveChat(thenMove, answer.folder.id);
    } });
  }

  rename(folder) {
    askText({ title: "Rename folder", label: "Name", value: folder.name, maxLength: 100, onSubmit: async (name) => {
      this.upsert((await organize.updateFolder(folder.id, { name })).folder);
    } });
  }

  editInstructions(folder) {
    askText({ title: `Instructions for “${folder.name}”`, label: "Every agent in this folder's chats reads these",
      value: folder.instructions, multiline: true, maxLength: 20000, field: "instructions",
      hint: "For example: answer in French; this project is a Django app on PostgreSQL.",
      onSubmit: async (instructions) => {
        this.upsert((await organize.updateFolder(folder.id, { instructions })).folder);
        toast(`Saved the instructions of “${folder.name}”.`);
      } });
  }

  async remove(folder) {
    if (!window.confirm(`Delete the folder “${folder.name}”? Its chats stay, in no folder.`)) return;
    try {
      await organize.deleteFolder(folder.id);
      this.onEvent({ change: "deleted", folder });
      toast(`Deleted the folder “${folder.name}”. Its chats are kept.`);
    } catch (error) {
      toast(`Could not delete the folder: ${error.message}`, { kind: "error" });
    }
  }

  upsert(folder) {
    this.folders = [...this.folders.filter((f) => f.id !== folder.id), folder]
      .sort((a, b) => a.name.localeCompare(b.name, undefined, { sensitivity: "base" }) || a.id - b.id);
    this.render();
    this.directory.render();
  }

  // folder.updated: created, renamed, instructions, deleted.
  onEvent(event) {
    if (event.change !== "deleted") { this.upsert(event.folder); return; }
    this.folders = this.folders.filter((f) => f.id !== event.folder.id);
    this.directory.onFolderDeleted(event.folder.id);
    this.render();
  }
}
