// The open chat's state, without any DOM: threads, messages, runs, the user's pending sends and
// the active thread. Events and fetched pages go through the same merge, so a message seen twice
// (live and again in a catch-up) is one message, and a stream never loses or repeats text.

const FRESH_MS = 10 * 60 * 1000; // a thread is continued on opening only while this fresh
const SHOWN_KINDS = new Set(["message", "note"]);

export function threadKeyOf(message) {
  return message.thread_id === null || message.thread_id === undefined ? "main" : String(message.thread_id);
}

export function newClientId() {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return [...bytes].map((b) => b.toString(16).padStart(2, "0")).join("");
}

// The title of a thread made by its first message: its first line, shortened.
export function titleFrom(text) {
  const line = (text || "").split("\n").map((l) => l.replace(/[#>*_`]+/g, " ").trim()).find(Boolean) || "New thread";
  const flat = line.replace(/\s+/g, " ");
  return flat.length > 60 ? `${flat.slice(0, 59).trimEnd()}…` : flat;
}

export class ChatModel {
  constructor(state) {
    this.chat = state.chat;
    this.members = state.members;
    this.threads = new Map();
    this.messages = new Map();
    this.logs = new Map(); // reply id -> log messages
    this.runs = new Map();
    this.pending = new Map(); // client id -> pending message
    this.versionShown = new Map(); // message id -> index of the version shown
    this.lastId = 0;
    this.syncedAt = state.now; // the hub's time of this state: edits after it are caught up
    this.deleted = false;
    for (const summary of state.threads) this.addThread(summary);
    const page = state.page;
    if (page.thread) {
      const thread = this.threads.get(page.thread);
      thread.loaded = true;
      thread.hasMore = page.has_more;
    }
    page.messages.forEach((m) => this.merge(m, { live: false }));
    page.runs.forEach((r) => this.mergeRun(r));
    const latest = state.threads.at(-1);
    // The ten-minute rule: continue the last thread only while it is fresh.
    this.activeKey = latest && Date.now() - Date.parse(latest.last_activity_at) < FRESH_MS ? latest.key : null;
  }

  addThread(summary) {
    const existing = this.threads.get(summary.key);
    const thread = existing || { key: summary.key, id: summary.id, ids: new Set(), resources: new Map(),
      loaded: false, hasMore: false, unread: 0 };
    Object.assign(thread, {
      title: summary.title, created_at: summary.created_at,
      last_activity_at: summary.last_activity_at || thread.last_activity_at,
      last_message: summary.last_message || thread.last_message || null,
      last_question: summary.last_question || thread.last_question || null,
      message_count: summary.message_count ?? thread.message_count ?? 0,
    });
    if (summary.last_message) this.lastId = Math.max(this.lastId, summary.last_message.id);
    this.threads.set(summary.key, thread);
    return thread;
  }

  threadFor(key) {
    return this.threads.get(key) || this.addThread({ key, id: key === "main" ? null : Number(key),
      title: key === "main" ? "Main thread" : "Thread", created_at: null, last_activity_at: null,
      last_message: null, message_count: 0 });
  }

  // Threads shown as previews: every one but the active, least recently active first.
  orderedThreads() {
    return [...this.threads.values()].sort((a, b) =>
      (Date.parse(a.last_activity_at || a.created_at || 0) || 0) - (Date.parse(b.last_activity_at || b.created_at || 0) || 0)
      || (a.id || 0) - (b.id || 0));
  }

  /**
   * Merge a message from an event (live) or a fetched page. Returns what changed:
   * { message, thread, isNew, created }.
   */
  merge(incoming, { live = true, event = "" } = {}) {
    const key = threadKeyOf(incoming);
    const thread = this.threadFor(key);
    const existing = this.messages.get(incoming.id);
    let message = { ...incoming, data: { ...(incoming.data || {}) } };
    if (existing && !live) {
      const sameRun = existing.run_id === incoming.run_id;
      if (sameRun && existing.status !== "streaming" && incoming.status === "streaming") {
        return { message: existing, thread, isNew: false }; // a stale page: the live settle came first
      }
      if (sameRun && existing.status === "streaming" && incoming.status === "streaming") {
        // The database holds the last checkpoint; the live stream may be ahead of it.
        if (existing.content.startsWith(incoming.content)) message.content = existing.content;
        const have = existing.data.reasoning || "";
        if (have.startsWith(incoming.data.reasoning || "")) message.data.reasoning = have;
      }
    }
    this.lastId = Math.max(this.lastId, incoming.id);
    if (incoming.kind === "log") {
      const list = this.logs.get(incoming.reply_to_id) || [];
      const index = list.findIndex((l) => l.id === incoming.id);
      if (index >= 0) list[index] = message; else list.push(message);
      this.logs.set(incoming.reply_to_id, list.sort((a, b) => a.id - b.id));
      this.messages.set(incoming.id, message);
      return { message, thread, isNew: !existing, log: true };
    }
    if (incoming.kind === "resource") {
      thread.resources.set(incoming.id, message);
      this.messages.set(incoming.id, message);
      return { message, thread, isNew: !existing, resource: true };
    }
    this.messages.set(incoming.id, message);
    thread.ids.add(incoming.id);
    if (SHOWN_KINDS.has(incoming.kind) && (!thread.last_message || thread.last_message.id <= incoming.id)) {
      thread.last_message = message;
      if (!existing) {
        thread.message_count = (thread.message_count || 0) + (live ? 1 : 0);
        const at = incoming.created_at;
        if (at && (!thread.last_activity_at || at > thread.last_activity_at)) thread.last_activity_at = at;
      }
    }
    return { message, thread, isNew: !existing, created: event === "message.created" };
  }

  mergeRun(run) {
    const existing = this.runs.get(run.id);
    const merged = { ...(existing || {}), ...run };
    // When this page first saw the run queued (its own clock): a run left queued for a while
    // shows that it waits for a worker (messages.js waitingForWorker).
    if (merged.status === "queued") merged.queuedSince = existing?.queuedSince ?? Date.now();
    else delete merged.queuedSince;
    this.runs.set(run.id, merged);
    return merged;
  }

  runFor(message) {
    return message.run_id ? this.runs.get(message.run_id) : undefined;
  }

  // A newer run that will stream into this message (a continuation or a regenerate), if any.
  continuationFor(message) {
    let found;
    for (const run of this.runs.values()) {
      if (run.reply_message_id === message.id && run.id !== message.run_id && ["queued", "running"].includes(run.status)) {
        found = run;
      }
    }
    return found;
  }

  // Runs in flight whose reply has no message yet: they show as "thinking" placeholders. A reply's
  // message.created can arrive before the run.updated that names it: the message's own run_id
  // says it is there, so the placeholder never shows beside the reply.
  thinkingRuns(threadKey) {
    const live = [...this.runs.values()].filter((run) => ["queued", "running"].includes(run.status)
      && !(run.reply_message_id && this.messages.has(run.reply_message_id))
      && (run.thread_id === null || run.thread_id === undefined ? "main" : String(run.thread_id)) === threadKey);
    if (!live.length) return live;
    const answered = new Set([...this.messages.values()].map((message) => message.run_id).filter(Boolean));
    return live.filter((run) => !answered.has(run.id));
  }

  // Apply a delta. Returns "applied", "ignored", "unknown" (message not here yet) or "gap".
  applyDelta(event) {
    const message = this.messages.get(event.message_id);
    if (!message) return "unknown";
    if (message.status !== "streaming") return "ignored";
    const reasoning = event.part === "reasoning";
    const have = reasoning ? message.data.reasoning || "" : message.content;
    if (event.offset > have.length) return "gap";
    const fresh = event.text.slice(have.length - event.offset);
    if (!fresh) return "ignored";
    if (reasoning) message.data.reasoning = have + fresh;
    else message.content = have + fresh;
    return "applied";
  }

  logsFor(message) {
    return message.id ? this.logs.get(message.id) || [] : [];
  }

  // The steps (tool calls, thinking) of the version of a reply shown: each earlier answer lists
  // its own (data.versions[i].log_ids); the current one has the rest.
  logsShown(message) {
    const all = this.logsFor(message);
    const versions = message.data?.versions || [];
    if (!versions.length) return all;
    const index = this.versionIndex(message);
    if (index < versions.length) {
      const own = new Set(versions[index].log_ids || []);
      return all.filter((log) => own.has(log.id));
    }
    const earlier = new Set(versions.flatMap((version) => version.log_ids || []));
    return all.filter((log) => !earlier.has(log.id));
  }

  textShown(message) {
    const versions = message.data?.versions || [];
    const index = this.versionShown.get(message.id);
    if (index === undefined || index >= versions.length) return message.content;
    return versions[index].content;
  }

  versionIndex(message) {
    const versions = message.data?.versions || [];
    const index = this.versionShown.get(message.id);
    return index === undefined || index > versions.length ? versions.length : index;
  }

  // The messages of a thread in order, with the pending sends aimed at it last.
  threadMessages(key) {
    const thread = this.threads.get(key);
    const shown = thread ? [...thread.ids].map((id) => this.messages.get(id)).filter(Boolean) : [];
    shown.sort((a, b) => a.id - b.id);
    return shown;
  }

  pendingFor(key) {
    return [...this.pending.values()].filter((p) => p.pending.threadKey === key);
  }

  inFlightRuns(key) {
    return [...this.runs.values()].filter((run) => ["queued", "running"].includes(run.status)
      && (run.thread_id === null || run.thread_id === undefined ? "main" : String(run.thread_id)) === key);
  }

  // Messages whose state may have moved on while the socket was down.
  unsettledIds() {
    return [...this.messages.values()].filter((m) => m.status === "streaming" || m.status === "interrupted").map((m) => m.id);
  }
}
