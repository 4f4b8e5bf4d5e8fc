// The open chat's writes: optimistic sends (confirmed by client_id; held while offline; offered
// again when lost), edits, cancel, regenerate, versions, and remotes attached to a thread.
// Mixed into ChatView (chatview.js); `this` is the view.

import { newClientId, titleFrom } from "./chatmodel.js";
import { getJSON, postJSON } from "./net.js";
import { announce, showMenu, toast } from "./ui.js";

export const sendingMethods = {
  // --- Sending ---------------------------------------------------------------------------------
  send(content, kind = "message", files = []) {
    if (this.model.deleted) return false;
    const clientId = newClientId();
    const threadKey = this.model.activeKey;
    const frame = { type: "message.send", content, kind, client_id: clientId };
    const shownFiles = this.fileTray ? this.fileTray.items.filter((item) => item.file).map((item) => item.file) : [];
    if (files.length) frame.files = files;
    if (threadKey === null) frame.new_thread_title = titleFrom(content || shownFiles.map((f) => f.name).join(", "));
    else if (threadKey !== "main") frame.thread_id = Number(threadKey);
    const pending = {
      id: 0, kind, content, format: kind === "note" ? "text" : "markdown", status: "final",
      data: files.length ? { files: shownFiles } : {},
      sender: { type: "user", name: this.app.user.name, avatar: "" }, created_at: new Date().toISOString(),
      pending: { clientId, threadKey, status: "waiting", frame },
    };
    const follows = threadKey === null && this.startingThread();
    this.model.pending.set(clientId, pending);
    this.conversation.addPending(pending);
    if (follows) {
      // The new thread's first message is on its way: this one follows it into that thread.
      pending.pending.awaitingThread = true;
      this.conversation.updatePending(pending);
      return true;
    }
    if (threadKey === null && this.pendingRemotes.length) {
      this.startThreadWithRemotes(pending);
      return true;
    }
    pending.pending.status = this.connection.send(frame) ? "sent" : "waiting";
    this.conversation.updatePending(pending);
    return true;
  },

  // A new thread with remotes chosen before its first message: the first remote starts the
  // thread, so the agents' first turn already has its tools; then the message goes into it.
  async startThreadWithRemotes(pending) {
    const remotes = this.pendingRemotes.splice(0);
    const { frame } = pending.pending;
    try {
      let threadId = null;
      for (const remote of remotes) {
        const body = threadId === null ? { remote_id: remote.id, new_thread_title: frame.new_thread_title }
          : { remote_id: remote.id, thread_id: threadId };
        const answer = await postJSON(`${this.base}/remotes/`, body);
        threadId = answer.message.thread_id;
      }
      delete frame.new_thread_title;
      frame.thread_id = threadId;
    } catch (error) {
      this.pendingRemotes.push(...remotes);
      pending.pending.status = "failed";
      pending.pending.error = `the remote could not be attached (${error.message})`;
      this.conversation.updatePending(pending);
      return;
    }
    if (!this.model.pending.has(pending.pending.clientId)) return;
    pending.pending.status = this.connection.send(frame) ? "sent" : "waiting";
    this.conversation.updatePending(pending);
  },

  // Whether a message that starts a new thread is still waiting for the hub to make it.
  startingThread() {
    return [...this.model.pending.values()].some((p) => p.pending.threadKey === null && !p.pending.awaitingThread
      && p.pending.status !== "failed");
  },

  // The new thread exists now: send what was written into it meanwhile.
  followIntoThread(key) {
    for (const pending of this.model.pending.values()) {
      if (pending.pending.threadKey !== null || !pending.pending.awaitingThread) continue;
      pending.pending.awaitingThread = false;
      pending.pending.threadKey = key;
      const { frame } = pending.pending;
      delete frame.new_thread_title;
      if (key !== "main") frame.thread_id = Number(key);
      pending.pending.status = this.connection.send(frame) ? "sent" : "waiting";
      this.conversation.updatePending(pending);
    }
  },

  onHeldFrameSent(frame) {
    const pending = frame.client_id ? this.model.pending.get(frame.client_id) : null;
    if (pending) { pending.pending.status = "sent"; this.conversation.updatePending(pending); }
  },

  retry(pending) {
    this.discard(pending);
    const previous = this.model.activeKey;
    // Retry into the thread it was aimed at (a new thread stays a new thread).
    this.model.activeKey = pending.pending.threadKey;
    this.send(pending.content, pending.kind);
    this.model.activeKey = previous;
  },

  discard(pending) {
    const { clientId } = pending.pending;
    this.connection.withdraw((frame) => frame.client_id === clientId);
    this.model.pending.delete(clientId);
    this.conversation.removePending(clientId);
  },

  saveEdit(message, content) {
    if (content === message.content) return;
    const clientId = newClientId();
    this.pendingEdits.set(clientId, { id: message.id, content: message.content, edited_at: message.edited_at, attempt: content });
    const current = this.model.messages.get(message.id);
    current.content = content;
    current.edited_at = new Date().toISOString();
    this.conversation.schedule(message.id);
    this.connection.send({ type: "message.edit", message_id: message.id, content, client_id: clientId });
  },

  // Save an edit and have the agents answer again: their replies stream anew (run.updated), the
  // earlier answers kept as versions. A refusal puts the text back in the composer.
  async resubmit(message, content) {
    const current = this.model.messages.get(message.id);
    const before = { content: current.content, edited_at: current.edited_at };
    current.content = content;
    this.conversation.schedule(message.id);
    try {
      const answer = await postJSON(`${this.base}/messages/${message.id}/resubmit/`, { content });
      this.model.merge(answer.message, { live: false });
      for (const reply of this.model.messages.values()) {
        if (reply.sender.type === "agent" && this.model.runFor(reply)?.trigger_message_id === message.id) {
          this.model.versionShown.delete(reply.id);
        }
      }
      this.conversation.schedule(message.id);
    } catch (error) {
      Object.assign(current, before);
      this.conversation.schedule(message.id);
      this.composer.startEdit(current, content);
      toast(`Could not submit the change: ${error.message}`, { kind: "error" });
    }
  },

  cancelRun(runId) {
    this.connection.send({ type: "run.cancel", run_id: runId, client_id: newClientId() });
    for (const button of this.root.querySelectorAll(".stop")) {
      const item = button.closest("li");
      if (item?.dataset.runId === runId || this.model.messages.get(Number(item?.dataset.messageId))?.run_id === runId) {
        button.disabled = true;
        button.textContent = "Stopping…";
      }
    }
  },

  async regenerate(message) {
    try {
      const answer = await postJSON(`${this.base}/messages/${message.id}/regenerate/`);
      this.model.versionShown.delete(message.id);
      this.onRun(answer.run);
    } catch (error) {
      if (error.saved) toast(error.message);
      else toast(`Could not regenerate: ${error.message}`, { kind: "error" });
    }
  },

  // A thumb up or down on a reply (null takes it back): shown at once, undone if the hub refuses.
  async rate(message, rating) {
    const before = message.data?.feedback;
    message.data = { ...(message.data || {}), feedback: rating ? { rating } : undefined };
    this.conversation.schedule(message.id);
    try {
      const answer = await postJSON(`${this.base}/messages/${message.id}/feedback/`, { rating });
      this.model.merge(answer.message, { live: false });
      this.conversation.schedule(message.id);
      announce(rating ? `Marked as a ${rating === "up" ? "good" : "bad"} reply` : "Rating taken back");
    } catch (error) {
      message.data = { ...(message.data || {}), feedback: before };
      this.conversation.schedule(message.id);
      toast(`Could not save your rating: ${error.message}`, { kind: "error" });
    }
  },

  showVersion(message, step) {
    const total = (message.data?.versions || []).length + 1;
    const index = Math.min(total - 1, Math.max(0, this.model.versionIndex(message) + step));
    this.model.versionShown.set(message.id, index);
    this.conversation.schedule(message.id);
  },

  // --- Remotes ---------------------------------------------------------------------------------
  async chooseRemote(button) {
    let remotes = [];
    try {
      remotes = (await getJSON(this.app.urls.remote_choices)).remotes;
    } catch (error) {
      toast(`Could not list your remotes: ${error.message}`, { kind: "error" });
      return;
    }
    showMenu(button, [
      ...remotes.map((remote) => ({ label: remote.name, onSelect: () => this.attachRemote(remote) })),
      ...(remotes.length ? [{ separator: true }] : [{ label: "No remotes connected yet", disabled: true }]),
      { label: "Connect a remote…", href: this.app.urls.remotes },
    ], { align: "start" });
  },

  async attachRemote(remote) {
    const key = this.model.activeKey;
    if (key === null) {
      // UI-first: the thread does not exist yet; the remote starts it with the first message.
      if (!this.pendingRemotes.some((r) => r.id === remote.id)) this.pendingRemotes.push(remote);
      this.conversation.refreshChips();
      return;
    }
    try {
      await postJSON(`${this.base}/remotes/`, { remote_id: remote.id, thread_id: key === "main" ? null : Number(key) });
    } catch (error) {
      toast(`Could not attach ${remote.name}: ${error.message}`, { kind: "error" });
    }
  },
};
