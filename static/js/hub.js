// The chat page's entry: the sidebar directory, the open chat (or the new-chat state), moving
// between chats without a reload, the socket for the directory when no chat is open, keyboard
// shortcuts and the phone-width drawer.

import { ChatView } from "./chatview.js";
import { Directory } from "./directory.js";
import { Connection, getJSON, postJSON } from "./net.js";
import { NewChatView } from "./newchat.js";
import { themeButton } from "./theme.js";
import { closeMenus, h, refreshTimes, toast } from "./ui.js";

const initial = JSON.parse(document.getElementById("hub-initial").textContent);
const main = document.getElementById("main");
const sidebar = document.getElementById("sidebar");
const scrim = document.getElementById("scrim");

const app = {
  user: initial.user,
  agents: initial.agents,
  limits: initial.limits,
  urls: { ...initial.urls, create: "/chats/new/" },
  view: null,
  userSocket: null,

  title: document.title,
  unseen: 0,

  // The tab's title, with the number of messages that arrived while the tab was hidden.
  setTitle(title) {
    this.title = title;
    document.title = this.unseen ? `(${this.unseen}) ${title}` : title;
  },

  noteArrival() {
    if (!document.hidden) return;
    this.unseen += 1;
    this.setTitle(this.title);
  },

  agentById(id) {
    return this.agents.find((a) => a.id === id);
  },

  sidebarButton() {
    return h("button", { type: "button", class: "btn-icon sidebar-open", "aria-label": "Show chats", "aria-controls": "sidebar",
      "aria-expanded": "false", text: "☰", onclick: () => openSidebar(true) });
  },

  onUserEvent(event) {
    if (event.type === "directory.updated") {
      directory.onEvent(event);
      if (this.view?.model?.chat.id === event.chat.id && event.change === "renamed") this.view.setChat(event.chat);
    } else if (event.type === "folder.updated") {
      directory.folderList.onEvent(event);
    } else if (event.type === "memory.updated") {
      // What agents remember changed (here, in another tab, or by an agent): say so where it shows.
      toast(`Memory updated: ${event.block.label}`, { action: "Open Memory", onAction: () => { location.href = this.urls.memory; } });
    } else if (event.type === "share.updated") {
      window.dispatchEvent(new CustomEvent("hub:share-updated", { detail: event }));  // an open Share dialog
    }
  },

  // The open chat's socket closed for good (the chat was deleted): keep the sidebar live.
  onChatClosed() {
    directory.reload();
    if (!this.userSocket) startUserSocket();
  },

  onChatChanged(chat) {
    directory.upsert(chat);
    directory.render();
  },

  async deleteChat(chat) {
    try {
      await postJSON(`/chats/${chat.id}/delete/`);
    } catch (error) {
      toast(`Could not delete “${chat.title}”: ${error.message}`, { kind: "error" });
      return;
    }
    directory.upsert({ ...chat, deleted_at: new Date().toISOString() });
    directory.render();
    if (this.view?.model?.chat.id === chat.id) showHome({ push: true });
    if (chat.kind === "temporary") toast(`Deleted the temporary chat “${chat.title}”.`);
    else toast(`Moved “${chat.title}” to the trash.`, { action: "Undo", onAction: () => this.restoreChat(chat) });
  },

  // Keep a temporary chat: stored from now on, under the same address.
  async saveChat(chat) {
    this.saving = chat.id;  // its own chat.saved event is no news to this tab
    try {
      const state = await postJSON(`/chats/${chat.id}/save/`);
      if (this.view?.model?.chat.id === chat.id) this.openChat(state, { push: false });
      else { directory.upsert(state.chat); directory.render(); }
      toast(`Saved “${state.chat.title}”. It stays with your other chats.`);
    } catch (error) {
      toast(`Could not save the chat: ${error.message}`, { kind: "error" });
    } finally {
      this.saving = null;
    }
  },

  // The open chat changed kind (saved in another tab): read it again, with its stored ids.
  async reopen(chatId) {
    if (this.view?.model?.chat.id !== chatId) return;
    try {
      this.openChat(await getJSON(`/chats/${chatId}/state/`), { push: false });
    } catch (error) {
      toast(`Could not reload the chat: ${error.message}`, { kind: "error" });
    }
  },

  async restoreChat(chat) {
    try {
      const answer = await postJSON(`/chats/${chat.id}/restore/`);
      directory.upsert(answer.chat);
      if (directory.trash) directory.chats = directory.chats.filter((c) => c.id !== chat.id);
      directory.render();
      toast(`Restored “${answer.chat.title}”.`);
      if (this.view?.model?.chat.id === chat.id || this.view instanceof NewChatView) await navigate(chat.id, { push: true });
    } catch (error) {
      toast(`Could not restore: ${error.message}`, { kind: "error" });
    }
  },

  // "Branch from here": a new chat with everything up to the message, opened at once.
  async branchChat(chatId, message) {
    try {
      const state = await postJSON(`/chats/${chatId}/messages/${message.id}/branch/`);
      this.openChat(state, { push: true });
      toast(`Branched into “${state.chat.title}”.`);
    } catch (error) {
      toast(`Could not branch: ${error.message}`, { kind: "error" });
    }
  },

  navigate(chatId, { messageId = null } = {}) {
    return navigate(chatId, { push: true, messageId });
  },

  openChat(state, { push = false, firstMessage = null } = {}) {
    stopView();
    directory.upsert(state.chat);
    directory.render();
    this.view = new ChatView({ app: this, state, root: main, firstMessage });
    directory.setActive(state.chat.id);
    if (push) history.pushState({ chatId: state.chat.id }, "", `/chats/${state.chat.id}/`);
    openSidebar(false);
    this.view.composer.focus();
  },
};

function stopView() {
  app.view?.stop();
  app.view = null;
  app.userSocket?.stop();
  app.userSocket = null;
  closeMenus();
}

// With no chat open, the user's own events (the directory) come on a socket of their own.
function startUserSocket() {
  app.userSocket = new Connection("/ws/directory/", {
    onEvent: (event) => app.onUserEvent(event),
    // Every open reads the list again, the first too: what changed after the page was drawn (or
    // after the chat's socket closed) and before this socket joined the user's group reached no one.
    onOpen: () => directory.reload(),
  });
  app.userSocket.start();
}

function showHome({ push = false, temporary = false } = {}) {
  stopView();
  app.view = new NewChatView({ app, root: main, temporary });
  directory.setActive(null);
  if (push) history.pushState({ chatId: null }, "", app.urls.home);
  startUserSocket();
  app.view.focus();
}

// A message to show is named in the address as #message-<id> (search hits, the Librarian's links).
function messageInHash() {
  const match = /^#message-(\d+)$/.exec(location.hash);
  return match ? Number(match[1]) : null;
}

async function navigate(chatId, { push = false, messageId = null } = {}) {
  if (!chatId) { showHome({ push }); return; }
  if (app.view?.model?.chat.id === chatId && !app.view.model.deleted) {
    openSidebar(false);
    if (messageId) {
      if (push) history.pushState({ chatId }, "", `/chats/${chatId}/#message-${messageId}`);
      app.view.showMessage(messageId);
    } else app.view.composer.focus();
    return;
  }
  directory.setActive(chatId);
  main.setAttribute("aria-busy", "true");
  try {
    const state = await getJSON(`/chats/${chatId}/state/`);
    app.openChat(state, { push });
    if (messageId) {
      if (push) history.replaceState({ chatId }, "", `/chats/${chatId}/#message-${messageId}`);
      app.view.showMessage(messageId);
    }
  } catch (error) {
    toast(error.status === 404 ? "That chat is gone (deleted or not yours)." : `Could not open the chat: ${error.message}`, { kind: "error" });
    if (!app.view) showHome({ push: false });
  } finally {
    main.removeAttribute("aria-busy");
  }
}

// A link to a chat (or a message in one) inside a message opens in place, as the sidebar's do.
document.addEventListener("click", (event) => {
  const link = event.target.closest?.(".msg-content a[href^='/chats/']");
  if (!link || event.metaKey || event.ctrlKey || event.shiftKey || event.button !== 0) return;
  const url = new URL(link.href, location.href);
  const match = /^\/chats\/([^/]+)\/$/.exec(url.pathname);
  if (!match || url.origin !== location.origin) return;
  event.preventDefault();
  const message = /^#message-(\d+)$/.exec(url.hash);
  app.navigate(match[1], { messageId: message ? Number(message[1]) : null });
});

document.addEventListener("visibilitychange", () => {
  if (!document.hidden && app.unseen) { app.unseen = 0; app.setTitle(app.title); }
});

window.addEventListener("popstate", () => {
  const match = /^\/chats\/([^/]+)\/$/.exec(location.pathname);
  navigate(match ? match[1] : null, { messageId: messageInHash() });
});

// --- The drawer at phone width -------------------------------------------------------------
function openSidebar(open) {
  document.body.classList.toggle("sidebar-shown", open);
  scrim.hidden = !open;
  for (const button of document.querySelectorAll(".sidebar-open")) button.setAttribute("aria-expanded", String(open));
  if (open) sidebar.querySelector("#directory-search")?.focus();
}
scrim.addEventListener("click", () => openSidebar(false));
document.getElementById("sidebar-close").addEventListener("click", () => { openSidebar(false); main.querySelector(".sidebar-open")?.focus(); });

// --- Keyboard ------------------------------------------------------------------------------
document.addEventListener("keydown", (event) => {
  const typing = event.target.closest?.("input, textarea, [contenteditable]");
  const mod = event.ctrlKey || event.metaKey;
  if (mod && event.shiftKey && (event.key === "o" || event.key === "O")) { event.preventDefault(); showHome({ push: true }); }
  else if (mod && event.shiftKey && (event.key === "t" || event.key === "T")) { event.preventDefault(); showHome({ push: true, temporary: true }); }
  else if (mod && (event.key === "k" || event.key === "K")) { event.preventDefault(); openSidebar(true); document.getElementById("directory-search").focus(); }
  else if (event.altKey && (event.key === "t" || event.key === "T") && app.view instanceof ChatView) { event.preventDefault(); app.view.openThread(null); }
  else if (event.key === "Escape" && document.body.classList.contains("sidebar-shown")) { openSidebar(false); }
  else if (event.key === "/" && !typing) { event.preventDefault(); app.view?.composer?.focus(); }
});

// --- Start ---------------------------------------------------------------------------------
const directory = new Directory({ app, initial: initial.directory, folders: initial.folders || [] });
document.getElementById("directory-slot").replaceWith(directory.element);
document.getElementById("trash-slot").replaceWith(directory.archiveButton, directory.trashButton);
document.querySelector(".skip-link").addEventListener("click", (event) => {
  event.preventDefault();
  (app.view?.composer?.input || main).focus();
});
document.getElementById("new-chat").addEventListener("click", (event) => { event.preventDefault(); showHome({ push: true }); });
document.getElementById("new-temporary-chat").addEventListener("click", (event) => {
  event.preventDefault();
  showHome({ push: true, temporary: true });
});
themeButton(document.getElementById("theme-toggle"));
setInterval(() => refreshTimes(), 30000);

if (initial.open) {
  app.openChat(initial.open, { push: false });
  history.replaceState({ chatId: initial.open.chat.id }, "", location.href);
  if (messageInHash()) app.view.showMessage(messageInHash());
} else {
  showHome({ temporary: new URLSearchParams(location.search).has("temporary") });
}
document.body.classList.add("js-ready");
window.hub = app; // for people poking at the page in the console, and for the browser tests
