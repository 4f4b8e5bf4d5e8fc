// One message on the page: sender, time, content (markdown, sanitised), the state of the run
// that streams it, its collapsed reasoning and tool logs, and its actions. Elements are updated
// in place; the chrome (state line, actions) is rebuilt only when it changes, so a focused
// button keeps its focus while the text streams.

import { messageFiles } from "./attachments.js";
import { copyButton, renderContent } from "./markdown.js";
import { avatar, clockTime, fullTime, h, icon } from "./ui.js";

const IN_FLIGHT = new Set(["queued", "running"]);
// A run still queued this long after the page saw it is waiting for a worker, not starting.
export const WORKER_WAIT_MS = 5000;

export function isInFlight(run) {
  return Boolean(run && IN_FLIGHT.has(run.status));
}

// The state a reply shows, from its status and its run's: [css class, label, detail].
export function replyState(msg, run, continuation) {
  const recovering = continuation && isInFlight(continuation);
  if (recovering && continuation.kind === "regenerate" && msg.status !== "streaming") return ["thinking", "Regenerating…", ""];
  switch (msg.status) {
    case "streaming":
      if (run && (run.kind === "continue" || run.attempt > 1)) return ["recovered", "Recovered · continuing", ""];
      if (run?.kind === "regenerate" && !msg.content) return ["thinking", "Regenerating…", ""];
      if (!msg.content) return ["thinking", "Thinking…", ""];
      return ["streaming", "Writing…", ""];
    case "interrupted":
      return recovering
        ? ["recovered", "Interrupted · resuming", "The worker stopped; Hub resumes from the last checkpoint."]
        : ["interrupted", "Interrupted", "The reply stopped before it was finished."];
    case "cancelled":
      return ["cancelled", "Stopped", "You stopped this reply; the text so far is kept."];
    case "error":
      return ["failed", "Failed", msg.data?.error || "The agent could not answer."];
    default:
      if (run && (run.kind === "continue" || run.attempt > 1)) {
        return ["recovered-done", "Recovered", "The worker stopped mid-reply; Hub resumed it from its checkpoint."];
      }
      return ["", "", ""];
  }
}

// A reply's model and tokens as its provider reported them: "gpt-4.1-mini · 1,234 in · 567 out".
export function usageLine(msg) {
  const usage = msg.usage;
  if (!usage || msg.status === "streaming") return "";
  const count = (n) => Number(n || 0).toLocaleString("en-US");
  return [usage.model, `${count(usage.input_tokens)} in`, `${count(usage.output_tokens)} out`].filter(Boolean).join(" · ");
}

function senderLabel(msg, ctx) {
  if (msg.sender.type === "agent") return msg.sender.name;
  return ctx.userName ? `${ctx.userName}` : "You";
}

function logDetails(log) {
  const label = log.subkind === "reasoning" ? "Reasoning" : log.subkind === "tool" ? `Tool · ${log.data?.name || "call"}` : "Log";
  const body = h("div", { class: "log-body" });
  if (log.subkind === "tool" && log.data) {
    body.append(
      h("div", { class: "log-label", text: "Arguments" }),
      h("pre", { class: "plain" }, h("code", { text: JSON.stringify(log.data.args ?? {}, null, 2) })),
      h("div", { class: "log-label", text: "Result" }),
      h("pre", { class: "plain" }, h("code", { text: typeof log.data.result === "string" ? log.data.result : JSON.stringify(log.data.result, null, 2) })),
    );
  } else {
    body.append(h("div", { class: "plain-text", text: log.content }));
  }
  return h("details", { class: `log log-${log.subkind || "other"}`, dataset: { logId: log.id } },
    h("summary", {}, h("span", { text: label })), body);
}

function liveReasoning(text) {
  return h("details", { class: "log log-reasoning live" },
    h("summary", {}, h("span", { text: "Thinking" }), h("span", { class: "dots", "aria-hidden": "true" })),
    h("div", { class: "log-body" }, h("div", { class: "plain-text reasoning-text", text })));
}

function actionButton(label, onclick, { title, cls = "", name } = {}) {
  return h("button", { type: "button", class: `btn-ghost btn-small ${cls}`, text: label, title, "aria-label": name, onclick });
}

function buildActions(msg, ctx, state, run) {
  const actions = h("div", { class: "msg-actions" });
  const agentReply = msg.sender.type === "agent" && msg.kind === "message";
  if (msg.pending) {
    if (msg.pending.status === "failed") {
      actions.append(actionButton("Retry", () => ctx.onRetry(msg), { cls: "primary" }),
        actionButton("Edit", () => ctx.onRecall(msg)), actionButton("Discard", () => ctx.onDiscard(msg)));
    } else if (msg.pending.status === "waiting") {
      actions.append(actionButton("Cancel", () => ctx.onDiscard(msg)));
    }
    return actions;
  }
  if (msg.status === "streaming" && msg.run_id) {
    actions.append(actionButton("Stop", () => ctx.onCancel(msg.run_id), { cls: "stop", title: `Stop ${msg.sender.name}'s reply` }));
    return actions;
  }
  const versions = msg.data?.versions || [];
  if (agentReply && versions.length) {
    const shown = ctx.versionShown(msg);
    const total = versions.length + 1;
    actions.append(h("span", { class: "versions" },
      actionButton("‹", () => ctx.onVersion(msg, -1), { name: "Earlier version", title: "Earlier version", cls: "icon" }),
      h("span", { class: "version-count", text: `${shown + 1}/${total}` }),
      actionButton("›", () => ctx.onVersion(msg, 1), { name: "Later version", title: "Later version", cls: "icon" })));
    actions.lastChild.querySelectorAll("button")[0].disabled = shown === 0;
    actions.lastChild.querySelectorAll("button")[1].disabled = shown === total - 1;
  }
  actions.append(copyButton(() => ctx.textShown(msg)));
  if (msg.kind === "message" || msg.kind === "note") actions.append(actionButton("Edit", () => ctx.onEdit(msg)));
  if (agentReply && msg.run_id && !isInFlight(run)) actions.append(actionButton("Regenerate", () => ctx.onRegenerate(msg)));
  if (ctx.onBranch && typeof msg.id === "number") {
    actions.append(actionButton("Branch", () => ctx.onBranch(msg), { name: "Branch from here",
      title: "Branch from here: a new chat with everything up to this message" }));
  }
  if (state[0] === "failed" || state[0] === "interrupted") actions.lastChild?.classList.add("primary");
  if (agentReply) actions.append(thumbButton(msg, ctx, "up"), thumbButton(msg, ctx, "down"));
  return actions;
}

// A thumb on an agent's reply; pressing the one already given takes it back.
function thumbButton(msg, ctx, rating) {
  const given = msg.data?.feedback?.rating === rating;
  const label = rating === "up" ? "Good reply" : "Bad reply";
  return h("button", { type: "button", class: `btn-ghost btn-small thumb thumb-${rating}`, title: label, "aria-label": label,
    "aria-pressed": given ? "true" : "false", onclick: () => ctx.onRate(msg, given ? null : rating) },
  icon(rating === "up" ? "thumbUp" : "thumbDown"));
}

function pendingLabel(pending) {
  if (pending.awaitingThread) return "Follows the thread's first message…";
  if (pending.status === "waiting") return "Waiting for the connection…";
  if (pending.status === "failed") return `Not sent: ${pending.error || "the hub refused it"}`;
  if (pending.status === "unconfirmed") return "Checking whether it arrived…";
  return "Sending…";
}

function chromeKey(msg, ctx, run, continuation) {
  return JSON.stringify([
    msg.status, msg.pending?.status, msg.pending?.error, msg.pending?.awaitingThread, run?.status, run?.kind, run?.attempt,
    continuation?.status, msg.edited_at, (msg.data?.versions || []).length, ctx.versionShown(msg),
    ctx.logsFor(msg).map((l) => [l.id, l.content.length]), msg.data?.error, Boolean(msg.content),
    (msg.data?.files || []).map((f) => [f.id, f.text_status, f.pages]), msg.data?.feedback?.rating, usageLine(msg),
  ]);
}

export function createMessageElement(msg, ctx) {
  const li = h("li", { class: "msg", dataset: {} });
  const body = h("div", { class: "msg-body" },
    h("div", { class: "msg-meta" }),
    h("div", { class: "msg-logs" }),
    h("div", { class: "msg-content" }),
    h("div", { class: "msg-attachments" }),
    h("div", { class: "msg-foot" }));
  li.append(h("div", { class: "msg-side" }), body);
  updateMessageElement(li, msg, ctx, { force: true });
  return li;
}

export function updateMessageElement(li, msg, ctx, { force = false } = {}) {
  // Looked up once per repaint: the state, the chrome's key and the actions all use them.
  const run = ctx.runFor(msg);
  const continuation = ctx.continuationFor(msg);
  const state = msg.kind === "message" && msg.sender.type === "agent" ? replyState(msg, run, continuation) : ["", "", ""];
  const mine = msg.sender.type === "user";
  li.className = [
    "msg", mine ? "msg-user" : "msg-agent", `kind-${msg.kind}`, `status-${msg.status}`,
    msg.pending ? `pending pending-${msg.pending.status}` : "", state[0] ? `state-${state[0]}` : "",
    !msg.pending && msg.status !== "streaming" ? "settled" : "",
  ].filter(Boolean).join(" ");
  if (msg.id) { li.dataset.messageId = msg.id; li.id = `message-${msg.id}`; }
  if (msg.pending) li.dataset.clientId = msg.pending.clientId;
  li.setAttribute("aria-busy", msg.status === "streaming" ? "true" : "false");

  const key = chromeKey(msg, ctx, run, continuation);
  if (force || li._chrome !== key) {
    li._chrome = key;
    const side = li.querySelector(".msg-side");
    const meta = li.querySelector(".msg-meta");
    if (msg.kind === "note") {
      side.replaceChildren(h("span", { class: "note-mark", "aria-hidden": "true", text: "✎" }));
      meta.replaceChildren(h("span", { class: "note-label", text: "Note" }),
        h("span", { class: "msg-sender", text: senderLabel(msg, ctx) }));
    } else {
      side.replaceChildren(mine ? avatar("", msg.sender.name || "You") : avatar(msg.sender.avatar, msg.sender.name));
      meta.replaceChildren(h("span", { class: "msg-sender", text: senderLabel(msg, ctx) }));
    }
    const usage = usageLine(msg);
    if (msg.created_at) {
      meta.append(h("time", { datetime: msg.created_at, title: [fullTime(msg.created_at), usage].filter(Boolean).join(" · "),
        text: clockTime(msg.created_at) }));
    }
    if (usage) meta.append(h("span", { class: "msg-usage", text: usage }));
    if (msg.edited_at) meta.append(h("span", { class: "edited", title: `Edited ${fullTime(msg.edited_at)}`, text: "edited" }));
    if (state[1]) meta.append(h("span", { class: `run-state run-${state[0]}`, title: state[2] || state[1], text: state[1] }));

    const logs = li.querySelector(".msg-logs");
    const stored = ctx.logsFor(msg);
    const openLogs = new Set([...logs.querySelectorAll("details[open]")].map((d) => d.dataset.logId));
    logs.replaceChildren(...stored.map((log) => {
      const el = logDetails(log);
      if (openLogs.has(String(log.id))) el.open = true;
      return el;
    }));
    if (msg.status === "streaming" && msg.data?.reasoning && !stored.some((l) => l.subkind === "reasoning")) {
      logs.append(liveReasoning(msg.data.reasoning));
    }

    const attachments = li.querySelector(".msg-attachments");
    attachments.replaceChildren(messageFiles(msg.data?.files, ctx) || "");
    attachments.hidden = !msg.data?.files?.length;

    const foot = li.querySelector(".msg-foot");
    foot.replaceChildren();
    if (state[0] === "failed" || (state[2] && state[0] !== "recovered-done" && state[0] !== "cancelled")) {
      foot.append(h("div", { class: `msg-note-line ${state[0] === "failed" ? "error" : ""}`, role: state[0] === "failed" ? "alert" : null, text: state[2] }));
    }
    if (msg.pending) {
      foot.append(h("div", { class: `msg-note-line ${msg.pending.status === "failed" ? "error" : ""}`,
        role: msg.pending.status === "failed" ? "alert" : null, text: pendingLabel(msg.pending) }));
    }
    foot.append(buildActions(msg, ctx, state, run));
  } else if (msg.status === "streaming" && msg.data?.reasoning) {
    const live = li.querySelector(".reasoning-text");
    if (live) live.textContent = msg.data.reasoning;
    else updateMessageElement(li, msg, ctx, { force: true });
  }

  const text = ctx.textShown(msg);
  const content = li.querySelector(".msg-content");
  if (content._text !== text || content._format !== msg.format) {
    content._text = text;
    content._format = msg.format;
    renderContent(content, text, msg.kind === "note" ? "text" : msg.format);
    content.classList.toggle("markdown", msg.format === "markdown" && msg.kind !== "note");
  }
}

export function waitingForWorker(run, now = Date.now()) {
  return run.status === "queued" && run.queuedSince !== undefined && now - run.queuedSince >= WORKER_WAIT_MS;
}

// The placeholder's state: [css class, label, tooltip].
function thinkingState(run) {
  if (run.status !== "queued") return ["run-thinking", "Thinking…", ""];
  if (waitingForWorker(run)) {
    return ["run-waiting", "Waiting for a worker…",
      "No worker has taken this reply yet. It starts as soon as one is running; nothing is lost."];
  }
  return ["run-thinking", "Waiting to start…", ""];
}

// A reply that has no message yet: its run is queued or the worker is starting it.
export function createThinkingElement(run, agent, ctx) {
  const name = agent?.name || "Agent";
  const [cls, label, title] = thinkingState(run);
  return h("li", { class: "msg msg-agent state-thinking ghost", dataset: { runId: run.id }, "aria-busy": "true" },
    h("div", { class: "msg-side" }, avatar(agent?.avatar, name)),
    h("div", { class: "msg-body" },
      h("div", { class: "msg-meta" }, h("span", { class: "msg-sender", text: name }),
        h("span", { class: `run-state ${cls}`, title: title || null, text: label })),
      h("div", { class: "msg-content" }, h("span", { class: "typing", "aria-hidden": "true" }, h("i"), h("i"), h("i"))),
      h("div", { class: "msg-foot" }, h("div", { class: "msg-actions" },
        actionButton("Stop", () => ctx.onCancel(run.id), { cls: "stop", title: `Stop ${name}'s reply` })))));
}
