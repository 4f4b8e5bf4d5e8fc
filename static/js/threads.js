// The conversation pane: every thread but the active one as a collapsed preview (title, last
// message, time), then the active thread with its messages (or the New Thread state). Keeps the
// view pinned to the newest message while the reader is at the bottom.

import {
  WORKER_WAIT_MS, createMessageElement, createThinkingElement, updateMessageElement, waitingForWorker,
} from "./messages.js";
import { h, icon, relativeTime, snippet } from "./ui.js";

const PREVIEWS_SHOWN = 6;

export class ConversationView {
  constructor(scroller, model, ctx) {
    this.scroller = scroller;
    this.model = model;
    this.ctx = ctx;
    this.stuck = true;
    this.showAllPreviews = false;
    this.dirty = new Set();
    this.frame = 0;
    this.inner = h("div", { class: "conversation-inner" });
    this.previews = h("ol", { class: "thread-previews", "aria-label": "Other threads" });
    this.active = h("section", { class: "thread-active" });
    this.jump = h("button", { type: "button", class: "jump-latest", hidden: true, text: "↓ Latest",
      onclick: () => this.scrollToBottom(true) });
    this.inner.append(this.previews, this.active);
    scroller.replaceChildren(this.inner, this.jump);
    scroller.addEventListener("scroll", () => {
      this.stuck = scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 120;
      if (this.stuck) this.jump.hidden = true;
    }, { passive: true });
  }

  // --- Batched updates: many deltas a second become one paint ------------------------------
  schedule(id) {
    if (id !== undefined) this.dirty.add(id);
    if (!this.frame) this.frame = requestAnimationFrame(() => this.flush());
  }

  flush() {
    this.frame = 0;
    this.keepPinned(() => {
      for (const id of this.dirty) {
        const message = this.model.messages.get(id);
        const li = this.list?.querySelector(`li[data-message-id="${id}"]`);
        if (message && li) updateMessageElement(li, message, this.ctx);
      }
      this.dirty.clear();
    });
  }

  keepPinned(change) {
    const wasStuck = this.stuck;
    const before = this.scroller.scrollHeight;
    change();
    if (wasStuck) this.scrollToBottom();
    else if (this.scroller.scrollHeight > before) this.jump.hidden = false;
  }

  scrollToBottom(smooth = false) {
    this.scroller.scrollTo({ top: this.scroller.scrollHeight, behavior: smooth ? "smooth" : "instant" });
    this.stuck = true;
    this.jump.hidden = true;
  }

  // --- Previews ------------------------------------------------------------------------------
  renderPreviews() {
    const others = this.model.orderedThreads().filter((t) => t.key !== this.model.activeKey);
    const hidden = this.showAllPreviews ? 0 : Math.max(0, others.length - PREVIEWS_SHOWN);
    const items = [];
    if (hidden) {
      items.push(h("li", { class: "more-threads" }, h("button", { type: "button", class: "btn-ghost btn-small",
        text: `Show ${hidden} older thread${hidden === 1 ? "" : "s"}`,
        onclick: () => { this.showAllPreviews = true; this.renderPreviews(); } })));
    }
    for (const thread of others.slice(hidden)) items.push(this.previewItem(thread));
    this.keepPinned(() => this.previews.replaceChildren(...items));
    this.previews.hidden = items.length === 0;
  }

  // A thread's last exchange: the user's last message and what came last after it (a reply).
  lastExchange(thread) {
    const loaded = this.model.threadMessages(thread.key).filter((m) => m.kind === "message" || m.kind === "note");
    const last = loaded.length ? loaded[loaded.length - 1] : thread.last_message;
    const question = [...loaded].reverse().find((m) => m.kind === "message" && m.sender.type === "user")
      || thread.last_question;
    return question && last && question.id !== last.id ? [question, last] : [last].filter(Boolean);
  }

  previewItem(thread) {
    const line = (message) => {
      const who = message.sender.type === "agent" ? message.sender.name : "You";
      return h("span", { class: "preview-last",
        text: `${message.kind === "note" ? "Note · " : ""}${who}: ${snippet(message.content, 140) || "…"}` });
    };
    const exchange = this.lastExchange(thread);
    const inFlight = this.model.inFlightRuns(thread.key).length > 0;
    const button = h("button", { type: "button", class: "thread-preview", "aria-expanded": "false",
      dataset: { threadKey: thread.key }, onclick: () => this.ctx.onOpenThread(thread.key) },
    h("span", { class: "preview-top" },
      h("span", { class: "preview-title", text: thread.title }),
      inFlight ? h("span", { class: "preview-live", text: "replying…" }) : null,
      thread.unread ? h("span", { class: "badge", "aria-label": `${thread.unread} new`, text: String(thread.unread) }) : null,
      h("time", { datetime: thread.last_activity_at || "", dataset: { relative: "" }, text: relativeTime(thread.last_activity_at) })),
    ...(exchange.length ? exchange.map(line) : [h("span", { class: "preview-last", text: "No messages yet" })]));
    return h("li", {}, button);
  }

  // --- The active thread ---------------------------------------------------------------------
  renderActive() {
    const key = this.model.activeKey;
    const thread = key === null ? null : this.model.threads.get(key);
    const heading = h("h2", { class: "thread-title", id: "active-thread-title", tabindex: "-1" },
      h("span", { class: "thread-hash", "aria-hidden": "true", text: "#" }), thread ? thread.title : "New thread");
    const head = h("header", { class: "thread-head" }, heading, this.resourceChips(thread));
    this.active.setAttribute("aria-labelledby", "active-thread-title");
    this.active.dataset.threadKey = key ?? "new";
    this.list = h("ol", { class: "messages", "aria-label": thread ? `Messages in ${thread.title}` : "Messages in the new thread" });
    const parts = [head];
    if (thread?.hasMore) {
      parts.push(h("button", { type: "button", class: "btn-ghost btn-small load-older", text: "Load older messages",
        onclick: (event) => { event.target.disabled = true; this.ctx.onLoadOlder(key); } }));
    }
    if (thread && thread.loading) parts.push(h("p", { class: "muted loading", text: "Loading…" }));
    for (const message of key === null ? [] : this.model.threadMessages(key)) {
      this.list.append(createMessageElement(message, this.ctx));
    }
    for (const pending of this.model.pendingFor(key)) this.list.append(createMessageElement(pending, this.ctx));
    if (key === null && !this.list.children.length) {
      const hasThreads = this.model.threads.size > 0;
      parts.push(h("div", { class: "new-thread-hint" },
        h("p", { text: hasThreads ? "A new thread starts with your next message." : "No messages yet." }),
        h("p", { class: "muted", text: hasThreads
          ? "Open an earlier thread above to continue it."
          : "Say hello — agents in this chat answer in the thread your message starts." })));
    }
    parts.push(this.list);
    this.keepPinned(() => this.active.replaceChildren(...parts));
    this.syncThinking();
    this.renderPreviews();
  }

  resourceChips(thread) {
    const chips = h("ul", { class: "resource-chips", "aria-label": "Attached to this thread" });
    const resources = thread ? [...thread.resources.values()] : [];
    for (const resource of resources) {
      chips.append(h("li", { class: "chip", title: resource.content },
        icon("link"), h("span", { text: resource.data?.name || resource.content })));
    }
    for (const name of this.ctx.pendingResources?.(thread?.key ?? null) || []) {
      chips.append(h("li", { class: "chip chip-pending", title: "Attached when the thread starts" },
        icon("link"), h("span", { text: `${name} (on first message)` })));
    }
    chips.hidden = !chips.children.length;
    return chips;
  }

  refreshChips() {
    const key = this.model.activeKey;
    const old = this.active.querySelector(".resource-chips");
    old?.replaceWith(this.resourceChips(key === null ? null : this.model.threads.get(key)));
  }

  // Insert or update one message of the active thread, in id order (pending sends stay last).
  upsertMessage(message) {
    if (!this.list) return;
    this.keepPinned(() => {
      const existing = this.list.querySelector(`li[data-message-id="${message.id}"]`);
      if (existing) { updateMessageElement(existing, message, this.ctx); return; }
      const li = createMessageElement(message, this.ctx);
      const later = [...this.list.querySelectorAll("li[data-message-id]")].find((el) => Number(el.dataset.messageId) > message.id);
      const firstTail = this.list.querySelector("li.ghost, li.pending");
      this.list.insertBefore(li, later || firstTail || null);
      this.active.querySelector(".new-thread-hint")?.remove();
    });
    this.syncThinking();
  }

  // A pending send becomes the stored message (same place on the page).
  confirmPending(clientId, message) {
    const li = this.list?.querySelector(`li[data-client-id="${clientId}"]`);
    if (!li) { this.upsertMessage(message); return; }
    delete li.dataset.clientId;
    updateMessageElement(li, message, this.ctx, { force: true });
  }

  addPending(pending) {
    if (!this.list) return;
    this.active.querySelector(".new-thread-hint")?.remove();
    this.keepPinned(() => this.list.append(createMessageElement(pending, this.ctx)));
    this.scrollToBottom();
  }

  updatePending(pending) {
    const li = this.list?.querySelector(`li[data-client-id="${pending.pending.clientId}"]`);
    if (li) updateMessageElement(li, pending, this.ctx);
  }

  removePending(clientId) {
    this.list?.querySelector(`li[data-client-id="${clientId}"]`)?.remove();
  }

  // Placeholders for replies whose run has started but whose message does not exist yet.
  syncThinking() {
    if (!this.list) return;
    const key = this.model.activeKey;
    const runs = key === null ? [] : this.model.thinkingRuns(key);
    const wanted = new Set(runs.map((r) => r.id));
    for (const ghost of this.list.querySelectorAll("li.ghost")) {
      if (!wanted.has(ghost.dataset.runId)) ghost.remove();
    }
    this.keepPinned(() => {
      for (const run of runs) {
        const existing = this.list.querySelector(`li.ghost[data-run-id="${run.id}"]`);
        const agent = this.ctx.agentById(run.agent_id);
        const fresh = createThinkingElement(run, agent, this.ctx);
        if (existing) {
          if (existing.querySelector(".run-state").textContent !== fresh.querySelector(".run-state").textContent) existing.replaceWith(fresh);
        } else {
          this.list.insertBefore(fresh, this.list.querySelector("li.pending"));
        }
      }
    });
    this.recheckQueued(runs);
  }

  // A queued placeholder says it waits for a worker once WORKER_WAIT_MS pass with no change.
  recheckQueued(runs) {
    clearTimeout(this.queuedTimer);
    const now = Date.now();
    const due = runs.filter((run) => run.status === "queued" && run.queuedSince !== undefined && !waitingForWorker(run, now))
      .map((run) => run.queuedSince + WORKER_WAIT_MS - now);
    if (due.length) this.queuedTimer = setTimeout(() => this.syncThinking(), Math.max(0, Math.min(...due)) + 20);
  }
}
