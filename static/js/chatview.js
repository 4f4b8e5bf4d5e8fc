// The open chat: wires the model, the conversation pane, the header and the composer to the
// chat's websocket. Sends are optimistic (confirmed by client_id), a reconnect catches up by id
// and resumes streams from the server's replay buffer, and every failure keeps what was typed.

import { FileTray, openImage } from "./attachments.js";
import { ChatModel, threadKeyOf } from "./chatmodel.js";
import { Composer } from "./composer.js";
import { ChatHeader } from "./header.js";
import { CLOSE_DELETED, Connection, getJSON } from "./net.js";
import { sendingMethods } from "./sending.js";
import { ConversationView } from "./threads.js";
import { announce, h, snippet, toast } from "./ui.js";

// How many older pages showing a message may load before it gives up (a page is 50 messages).
const MAX_PAGES_TO_FIND = 40;

export class ChatView {
  constructor({ app, state, root, firstMessage = null }) {
    this.app = app;
    this.root = root;
    this.model = new ChatModel(state);
    this.base = `/chats/${this.model.chat.id}`;
    this.unknownDeltas = new Map();
    this.pendingEdits = new Map();
    this.pendingRemotes = [];
    this.lastGap = 0;
    this.build();
    this.connection = new Connection(`/ws/chats/${this.model.chat.id}/`, {
      onEvent: (event) => this.onEvent(event),
      onOpen: ({ first }) => this.catchUp({ first }),
      onStatus: (status, detail) => this.onStatus(status, detail),
      onSent: (frame) => this.onHeldFrameSent(frame),
    });
    this.connection.start();
    if (firstMessage) this.send(firstMessage.content, firstMessage.kind || "message");
  }

  // --- Layout ----------------------------------------------------------------------------------
  build() {
    const ctx = this.messageContext();
    this.header = new ChatHeader({ app: this.app, chatView: this });
    this.notice = h("div", { class: "chat-notice", role: "status", hidden: true });
    this.scroller = h("div", { class: "conversation", id: "conversation", tabindex: "-1" });
    this.conversation = new ConversationView(this.scroller, this.model, ctx);
    // A temporary chat takes no files (they would outlive it): save it first.
    this.fileTray = this.model.chat.kind === "temporary" ? null
      : new FileTray({ uploadUrl: `${this.base}/files/`, limits: this.app.limits });
    this.composer = new Composer({
      files: this.fileTray,
      limits: this.app.limits,
      draftKey: `hub-draft-${this.model.chat.id}`,
      placeholder: "Message the chat — @ to mention an agent",
      members: () => this.model.members,
      onSend: (content, kind, files) => this.send(content, kind, files),
      onSaveEdit: (message, content) => this.saveEdit(message, content),
      onResubmit: (message, content) => this.resubmit(message, content),
      onAttach: (button) => this.chooseRemote(button),
    });
    const newThread = h("button", { type: "button", class: "btn-ghost btn-small new-thread", text: "+ New thread",
      title: "Start a new thread (Alt+T)", onclick: () => this.openThread(null) });
    this.composerBar = h("div", { class: "composer-wrap" }, h("div", { class: "composer-row" }, newThread), this.composer.element);
    this.root.replaceChildren(this.header.element, this.notice, this.scroller, this.composerBar);
    if (this.fileTray) this.acceptDroppedFiles();
    this.header.render();
    this.conversation.renderActive();
    this.updateTarget();
    this.conversation.scrollToBottom();
  }

  messageContext() {
    const model = this.model;
    return {
      userName: "You",
      runFor: (m) => model.runFor(m),
      continuationFor: (m) => (m.id ? model.continuationFor(m) : undefined),
      logsFor: (m) => model.logsShown(m),
      textShown: (m) => model.textShown(m),
      versionShown: (m) => model.versionIndex(m),
      agentById: (id) => this.app.agentById(id) || model.members.find((a) => a.id === id),
      pendingResources: (key) => (key === null ? this.pendingRemotes.map((r) => r.name) : []),
      onCancel: (runId) => this.cancelRun(runId),
      onEdit: (m) => this.composer.startEdit(m, m.content),
      onRegenerate: (m) => this.regenerate(m),
      // A temporary chat cannot be branched (save it first): no button there.
      onBranch: this.model.chat.kind === "temporary" ? null : (m) => this.app.branchChat(this.model.chat.id, m),
      onRate: (m, rating) => this.rate(m, rating),
      onVersion: (m, step) => this.showVersion(m, step),
      onRetry: (m) => this.retry(m),
      onRecall: (m) => { this.discard(m); this.composer.recall(m.content); },
      onDiscard: (m) => this.discard(m),
      onOpenThread: (key) => this.openThread(key),
      onLoadOlder: (key) => this.loadOlder(key),
      onOpenImage: (file) => openImage(file),
    };
  }

  stop() {
    clearInterval(this.countdown);
    this.connection.stop();
  }

  updateTarget() {
    const key = this.model.activeKey;
    this.composer.setTarget(key === null ? "→ a new thread" : `→ ${this.model.threads.get(key)?.title || "thread"}`);
    this.syncStop();
  }

  // The composer's Stop stops the replies in flight in the thread it writes to.
  syncStop() {
    const key = this.model.activeKey;
    const live = key === null ? [] : this.model.inFlightRuns(key);
    this.composer.setStopper(live.length ? () => live.forEach((run) => this.cancelRun(run.id)) : null);
  }

  setChat(chat) {
    this.model.chat = { ...this.model.chat, ...chat };
    this.header.render();
    this.app.onChatChanged(this.model.chat);
  }

  setMembers(members) {
    this.model.members = members;
    this.header.render();
    this.composer.updateAnswering();
  }

  onStatus(status, detail) {
    this.header.setConnection(status, detail);
    if (status === "closed" && detail.code === CLOSE_DELETED) this.showDeleted();
    else if (status === "closed") this.showNotice("This chat is not available any more.", []);
    if (status === "offline") {
      // Sent but not confirmed: the catch-up after the reconnect decides whether it arrived.
      for (const pending of this.model.pending.values()) {
        if (pending.pending.status === "sent") { pending.pending.status = "unconfirmed"; this.conversation.updatePending(pending); }
      }
      clearInterval(this.countdown);
      this.countdown = setInterval(() => this.header.setConnection(this.connection.status, { retryAt: this.connection.retryAt }), 1000);
    } else {
      clearInterval(this.countdown);
    }
  }

  showNotice(text, actions) {
    this.notice.replaceChildren(h("p", { text }), ...actions);
    this.notice.hidden = false;
  }

  showDeleted() {
    if (this.model.deleted && !this.notice.hidden) return;
    this.model.deleted = true;
    this.connection.stop();
    this.app.onChatClosed();
    this.composer.setDisabled(true);
    this.root.classList.add("is-deleted");
    const back = h("a", { class: "btn btn-ghost btn-small", href: this.app.urls.home, text: "Back to your chats" });
    if (this.model.chat.kind === "temporary") {
      this.showNotice("This temporary chat is gone: it was deleted, or it expired.", [back]);
      return;
    }
    this.showNotice("This chat was deleted (here or in another tab). It is in the trash.", [
      h("button", { type: "button", class: "btn btn-small", text: "Restore it", onclick: () => this.app.restoreChat(this.model.chat) }),
      back,
    ]);
  }

  // Files dropped anywhere on the chat go into the composer's tray.
  acceptDroppedFiles() {
    const carriesFiles = (event) => [...(event.dataTransfer?.types || [])].includes("Files");
    this.root.addEventListener("dragover", (event) => {
      if (!carriesFiles(event)) return;
      event.preventDefault();
      this.root.classList.add("drop-target");
    });
    this.root.addEventListener("dragleave", (event) => {
      if (event.target === this.root || !this.root.contains(event.relatedTarget)) this.root.classList.remove("drop-target");
    });
    this.root.addEventListener("drop", (event) => {
      if (!carriesFiles(event)) return;
      event.preventDefault();
      this.root.classList.remove("drop-target");
      this.fileTray.add(event.dataTransfer.files);
      this.composer.focus();
    });
  }

  // A file's reading status: its chip in the tray, and its card in every message that carries it.
  onFile(file) {
    this.fileTray?.update(file);
    for (const message of this.model.messages.values()) {
      const files = message.data?.files;
      const index = files ? files.findIndex((f) => f.id === file.id) : -1;
      if (index < 0) continue;
      files[index] = { ...files[index], ...file };
      this.conversation.schedule(message.id);
    }
  }

  // --- Events ----------------------------------------------------------------------------------
  onEvent(event) {
    switch (event.type) {
      case "message.created": return this.onMessage(event.message, { clientId: event.client_id, event: event.type });
      case "message.edited": this.forgetPendingEdits(event.message.id); return this.onMessage(event.message, { event: event.type });
      case "message.settled": return this.onMessage(event.message, { event: event.type });
      case "message.delta": return this.onDelta(event);
      case "run.updated": return this.onRun(event.run);
      case "thread.created":
        this.model.addThread({ key: String(event.thread.id), id: event.thread.id, title: event.thread.title,
          created_at: event.thread.created_at, last_activity_at: event.thread.last_activity_at, message_count: 0 }).loaded = true;
        return this.conversation.renderPreviews();
      case "chat.updated":
        if (event.members) { this.model.members = event.members; this.composer.updateAnswering(); }
        return this.setChat(event.chat);
      case "chat.deleted": return this.showDeleted();
      case "file.updated": return this.onFile(event.file);
      case "chat.saved":
        if (this.app.saving === event.chat.id) return undefined;
        toast("This chat was saved in another tab: it stays with your other chats.");
        return this.app.reopen(event.chat.id);
      case "error": return this.onError(event);
      default: return this.app.onUserEvent(event);
    }
  }

  onMessage(incoming, { clientId = null, event = "", live = true } = {}) {
    const pending = clientId ? this.model.pending.get(clientId) : null;
    const result = this.model.merge(incoming, { live, event });
    const key = threadKeyOf(incoming);
    if (result.isNew && live && !clientId && incoming.kind === "message") this.app.noteArrival();
    if (live && event === "message.settled" && incoming.kind === "message" && incoming.sender.type === "agent") {
      // Streamed text is not read out as it arrives (aria-busy); the settled reply is.
      if (incoming.status === "final") announce(`${incoming.sender.name} replied: ${snippet(incoming.content, 300)}`);
      else if (incoming.status === "error") announce(`${incoming.sender.name}'s reply failed: ${incoming.data?.error || ""}`);
    }
    if (pending) {
      this.model.pending.delete(clientId);
      if (pending.pending.threadKey === null && this.model.activeKey === null) {
        // The new thread exists upstream now: it becomes the active thread.
        this.model.activeKey = key;
        result.thread.loaded = true;
        this.followIntoThread(key);
        this.conversation.renderActive();
        this.updateTarget();
        return;
      }
      if (key === this.model.activeKey) this.conversation.confirmPending(clientId, result.message);
      else this.conversation.removePending(clientId);
    } else if (result.log) {
      const reply = this.model.messages.get(incoming.reply_to_id);
      if (reply) this.conversation.schedule(reply.id);
      return;
    } else if (result.resource) {
      if (key === this.model.activeKey) this.conversation.refreshChips();
      return;
    } else if (key === this.model.activeKey) {
      this.conversation.upsertMessage(result.message);
      this.conversation.schedule(result.message.id);
    } else if (result.isNew && live && ["message", "note"].includes(incoming.kind)) {
      result.thread.unread = (result.thread.unread || 0) + 1;
    }
    this.replayUnknownDeltas(incoming.id);
    if (key !== this.model.activeKey || result.isNew) this.conversation.renderPreviews();
  }

  onDelta(event) {
    const outcome = this.model.applyDelta(event);
    if (outcome === "applied") this.conversation.schedule(event.message_id);
    else if (outcome === "unknown") {
      // The reply's message.created was missed (a reconnect): hold the text and fetch the message.
      const held = this.unknownDeltas.get(event.message_id) || [];
      held.push(event);
      this.unknownDeltas.set(event.message_id, held);
      clearTimeout(this.fetchUnknown);
      this.fetchUnknown = setTimeout(() => this.refetch([...this.unknownDeltas.keys()]), 150);
    } else if (outcome === "gap" && Date.now() - this.lastGap > 2000) {
      // A dropped delta: the server's snapshot on a fresh connection is the exact text so far.
      this.lastGap = Date.now();
      this.connection.reconnectNow();
    }
  }

  replayUnknownDeltas(id) {
    const held = this.unknownDeltas.get(id);
    if (!held) return;
    this.unknownDeltas.delete(id);
    held.forEach((delta) => this.onDelta(delta));
  }

  onRun(run) { this.onRuns([run]); }

  // Runs merge one by one, but the page looks over its messages and redraws once for them all.
  onRuns(runs) {
    if (!runs.length) return;
    runs.forEach((run) => this.model.mergeRun(run));
    const runIds = new Set(runs.map((run) => run.id));
    const replyIds = new Set(runs.map((run) => run.reply_message_id));
    for (const message of this.model.messages.values()) {
      if (runIds.has(message.run_id) || replyIds.has(message.id)) this.conversation.schedule(message.id);
    }
    this.conversation.syncThinking();
    this.conversation.renderPreviews();
    this.syncStop();
  }

  forgetPendingEdits(messageId) {
    // Pending edits are keyed by the frame's client_id; the hub's message.edited names the message.
    for (const [clientId, edit] of this.pendingEdits) if (edit.id === messageId) this.pendingEdits.delete(clientId);
  }

  onError(event) {
    const message = event.error?.message || "Something went wrong.";
    const pending = event.client_id ? this.model.pending.get(event.client_id) : null;
    if (pending) {
      pending.pending.status = "failed";
      pending.pending.error = message.replace(/^content: /, "");
      this.conversation.updatePending(pending);
      return;
    }
    const edit = event.client_id ? this.pendingEdits.get(event.client_id) : null;
    if (edit) {
      this.pendingEdits.delete(event.client_id);
      const current = this.model.messages.get(edit.id);
      if (current) { current.content = edit.content; current.edited_at = edit.edited_at; this.conversation.schedule(edit.id); }
      this.composer.startEdit(current || edit, edit.attempt);
      this.composer.showError(`Not saved: ${message}`);
      return;
    }
    // saved_not_started: a send was stored, only its reply waits for Redis; not an error to act on.
    toast(message, { kind: event.error?.code === "saved_not_started" ? "info" : "error" });
  }

  // --- Catching up after (re)connecting -----------------------------------------------------
  async catchUp({ first }) {
    try {
      let after = this.model.lastId;
      for (let page = 0; page < 20; page += 1) {
        const answer = await getJSON(`${this.base}/messages/?after=${after}`);
        this.onRuns(answer.runs);
        answer.messages.forEach((message) => this.onMessage(message, { live: false }));
        this.matchUnconfirmed(answer.messages);
        if (!answer.has_more || !answer.messages.length) break;
        after = answer.messages.at(-1).id;
      }
      await this.refetch(this.model.unsettledIds());
      // Edits made while this tab was not listening (message.edited is live only).
      const edited = await getJSON(`${this.base}/messages/?edited_after=${encodeURIComponent(this.model.syncedAt)}`);
      edited.messages.forEach((message) => this.onMessage(message, { live: false, event: "message.edited" }));
      this.model.syncedAt = edited.now;
      if (!first) {
        const threads = await getJSON(`${this.base}/threads/`);
        const active = this.model.threads.get(this.model.activeKey);
        const titleBefore = active?.title;
        threads.threads.forEach((summary) => this.model.addThread(summary));
        this.model.members = threads.members;
        this.composer.updateAnswering();
        this.setChat(threads.chat);
        // A thread made while the socket was down is known by its title only now.
        if (active && active.title !== titleBefore) { this.conversation.renderActive(); this.updateTarget(); }
        else this.conversation.renderPreviews();
      }
      for (const pending of this.model.pending.values()) {
        if (pending.pending.status === "unconfirmed") {
          pending.pending.status = "failed";
          pending.pending.error = "the connection dropped before the hub confirmed it";
          this.conversation.updatePending(pending);
        }
      }
    } catch (error) {
      if (error.status === 404) this.showDeleted();
      // A fetch lost to the network (or a hub restarting): try again while the socket is up.
      else if (error.status === 0 || error.status >= 500) setTimeout(() => { if (this.connection.isOpen) this.catchUp({ first }); }, 1500);
    }
  }

  async refetch(ids) {
    if (!ids.length) return;
    const answer = await getJSON(`${this.base}/messages/?ids=${ids.slice(0, 200).join(",")}`);
    this.onRuns(answer.runs);
    answer.messages.forEach((message) => this.onMessage(message, { live: false }));
    for (const id of ids) this.replayUnknownDeltas(id);
  }

  // A send whose confirmation was lost with the socket: the caught-up message is its echo.
  matchUnconfirmed(messages) {
    for (const pending of [...this.model.pending.values()]) {
      if (pending.pending.status !== "unconfirmed") continue;
      const echo = messages.find((m) => m.sender.type === "user" && m.kind === pending.kind && m.content === pending.content
        && !m._matched && (pending.pending.threadKey === null || threadKeyOf(m) === pending.pending.threadKey));
      if (!echo) continue;
      echo._matched = true;
      this.onMessage(echo, { clientId: pending.pending.clientId, live: false });
    }
  }

  // --- Threads ---------------------------------------------------------------------------------
  async openThread(key) {
    if (key === this.model.activeKey) { this.composer.focus(); return; }
    this.model.activeKey = key;
    const thread = key === null ? null : this.model.threads.get(key);
    if (thread) thread.unread = 0;
    this.updateTarget();
    if (thread && !thread.loaded) {
      thread.loading = true;
      this.conversation.renderActive();
      try {
        const answer = await getJSON(`${this.base}/messages/?thread=${key}`);
        answer.runs.forEach((run) => this.model.mergeRun(run));
        answer.messages.forEach((message) => this.model.merge(message, { live: false }));
        thread.loaded = true;
        thread.hasMore = answer.has_more;
      } catch (error) {
        toast(`Could not open the thread: ${error.message}`, { kind: "error" });
      }
      thread.loading = false;
    }
    if (this.model.activeKey !== key) return;
    this.conversation.renderActive();
    this.conversation.scrollToBottom();
    this.composer.focus();
  }

  // Open a message's thread, load older pages until it is there, scroll to it and mark it a moment.
  async showMessage(messageId) {
    try {
      const known = this.model.messages.get(messageId);
      const message = known || (await getJSON(`${this.base}/messages/?ids=${messageId}`)).messages[0];
      if (!message) { toast("That message is no longer in this chat."); return; }
      const key = threadKeyOf(message);
      await this.openThread(key);
      const thread = this.model.threads.get(key);
      for (let pages = 0; !this.model.messages.has(messageId) && thread?.hasMore && pages < MAX_PAGES_TO_FIND; pages++) {
        await this.loadOlder(key);
      }
      const item = this.root.querySelector(`li[data-message-id="${messageId}"]`);
      if (!item) { toast("That message could not be shown (it may be a step of a reply)."); return; }
      this.conversation.stuck = false;
      item.scrollIntoView({ block: "center" });
      item.classList.remove("flash");
      void item.offsetWidth; // restart the highlight when the same message is shown again
      item.classList.add("flash");
      setTimeout(() => item.classList.remove("flash"), 2400);
    } catch (error) {
      toast(`Could not show the message: ${error.message}`, { kind: "error" });
    }
  }

  async loadOlder(key) {
    const thread = this.model.threads.get(key);
    const oldest = Math.min(...this.model.threadMessages(key).map((m) => m.id));
    try {
      const answer = await getJSON(`${this.base}/messages/?thread=${key}&before=${oldest}`);
      answer.runs.forEach((run) => this.model.mergeRun(run));
      answer.messages.forEach((message) => this.model.merge(message, { live: false }));
      thread.hasMore = answer.has_more;
    } catch (error) {
      toast(`Could not load older messages: ${error.message}`, { kind: "error" });
    }
    const scroller = this.scroller;
    const fromBottom = scroller.scrollHeight - scroller.scrollTop;
    this.conversation.stuck = false;
    this.conversation.renderActive();
    scroller.scrollTop = scroller.scrollHeight - fromBottom;
  }

}

// Sending, editing, cancelling, regenerating and remotes live in sending.js.
Object.assign(ChatView.prototype, sendingMethods);
