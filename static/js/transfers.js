// The Import and export page: start an import (upload) or an export, and follow every job live.
// Jobs come from the API (/api/v1/transfers/); progress arrives as transfer.updated on the user's
// socket, and while a job runs it is also read again every few seconds, so a dropped event or a
// closed socket only delays the bar.

import { Connection, HubRequestError, csrfToken, getJSON, postJSON } from "./net.js";

const API = "/api/v1/transfers/";
const POLL_MS = 2000;
const PAGE = 20;
const page = document.getElementById("transfers-page");
const list = document.getElementById("transfer-jobs");
const empty = document.getElementById("jobs-empty");
const status = document.getElementById("jobs-status");
const more = document.getElementById("jobs-more");
const jobs = new Map(); // id -> job, newest first by created_at
let cursor = null;

const FORMATS = { auto: "", hub: "Hub", chatgpt: "ChatGPT", claude: "Claude", markdown: "Markdown" };

function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === false || value == null) continue;
    node.setAttribute(key, value === true ? "" : value);
  }
  node.append(...children.filter((child) => child != null && child !== false));
  return node;
}

function when(iso) {
  return iso ? new Date(iso).toLocaleString() : "";
}

function title(job) {
  const source = FORMATS[job.format] ? ` (${FORMATS[job.format]})` : "";
  return job.kind === "import" ? `Import of ${job.name || "a file"}${source}` : `Export of ${job.name}${source}`;
}

function statusText(job) {
  if (job.status === "queued") return "Waiting to start…";
  if (job.status === "running") return job.total ? `${job.done} of ${job.total}` : "Reading the file…";
  if (job.status === "failed") return "Failed";
  return job.report && job.report.expired_at ? "Done, file deleted" : "Done";
}

function summary(job) {
  const report = job.report || {};
  if (job.status === "failed") return h("p", { class: "job-error", role: "alert" }, job.error);
  if (job.status !== "done") return null;
  if (job.kind === "export") {
    return h("p", { class: "job-summary" }, `Exported ${report.exported ?? job.done} chat${report.exported === 1 ? "" : "s"}. `,
      job.download_url ? h("a", { href: job.download_url, class: "job-download", download: job.name }, `Download ${job.name}`) : null,
      job.download_url && job.expires_at ? ` (kept until ${when(job.expires_at)})` : null,
      report.expired_at ? `Its file was deleted on ${when(report.expired_at)}; export again for a new one.` : null);
  }
  const imported = report.imported ?? 0;
  const skipped = report.skipped ?? 0;
  const parts = [h("p", { class: "job-summary" },
    `Imported ${imported} chat${imported === 1 ? "" : "s"}` + (skipped ? `, skipped ${skipped}.` : "."))];
  if (skipped && report.first_skip) parts.push(h("p", { class: "job-error" }, `First skipped: ${report.first_skip}`));
  if ((report.skips || []).length) {
    parts.push(h("details", {}, h("summary", {}, "What was skipped"),
      h("ul", {}, ...report.skips.map((s) => h("li", {}, `Conversation ${s.entry}${s.title ? ` ("${s.title}")` : ""}: ${s.reason}`)))));
  }
  if ((report.chats || []).length) {
    parts.push(h("details", {}, h("summary", {}, "Imported chats"),
      h("ul", {}, ...report.chats.map((c) => h("li", {}, h("a", { href: `/chats/${c.id}/` }, c.title))))));
  }
  return parts;
}

function jobNode(job) {
  const running = job.status === "queued" || job.status === "running";
  const bar = running
    ? h("progress", { max: job.total || 1, value: job.total ? job.done : false, "aria-label": `${title(job)}: progress` })
    : null;
  const forget = running ? null : h("button", { type: "button", class: "link job-forget", "data-id": job.id,
    "aria-label": `Forget: ${title(job)}` }, "Forget");
  const shown = summary(job);
  return h("li", { class: "transfer-job", "data-id": job.id, "data-status": job.status },
    h("div", { class: "job-head" }, h("span", { class: "job-title" }, title(job)),
      h("span", { class: "job-status", "data-status": job.status }, statusText(job)),
      h("time", { class: "muted", datetime: job.created_at }, when(job.created_at)), forget),
    bar, ...(Array.isArray(shown) ? shown : [shown]));
}

function render() {
  const ordered = [...jobs.values()].sort((a, b) => b.created_at.localeCompare(a.created_at));
  list.replaceChildren(...ordered.map(jobNode));
  empty.hidden = ordered.length > 0;
  more.hidden = !cursor;
  schedulePolls();
}

function upsert(job) {
  const known = jobs.get(job.id);
  // Events and polls may cross: never go back to an earlier state of a job.
  if (known && known.status !== "queued" && job.status === "queued") return;
  if (known && (known.status === "done" || known.status === "failed") && job.status === "running") return;
  if (known && known.status === job.status && known.done > job.done) return;
  jobs.set(job.id, job);
  render();
}

let pollTimer = null;
function schedulePolls() {
  clearTimeout(pollTimer);
  const running = [...jobs.values()].filter((j) => j.status === "queued" || j.status === "running");
  if (!running.length) return;
  pollTimer = setTimeout(async () => {
    for (const job of running) {
      try { upsert(await getJSON(`${API}${job.id}/`)); } catch { /* the next poll tries again */ }
    }
    schedulePolls();
  }, POLL_MS);
}

// --- Forms -----------------------------------------------------------------------------------

function showErrors(form, prefix, error) {
  const fields = error instanceof HubRequestError ? error.fields : {};
  let named = false;
  for (const name of ["file", "format", "scope", "chat_id", "folder_id"]) {
    const slot = document.getElementById(`${prefix}-${name === "chat_id" || name === "folder_id" ? "scope" : name}-error`);
    if (!slot || !fields[name]) continue;
    slot.textContent = `${name === "chat_id" || name === "folder_id" ? "scope" : name}: ${fields[name].join(" ")}`;
    slot.hidden = false;
    slot.previousElementSibling?.setAttribute("aria-invalid", "true");
    named = true;
  }
  const general = document.getElementById(`${prefix}-error`);
  general.textContent = named ? "" : error.message;
  general.hidden = named;
}

function clearErrors(form, prefix) {
  form.querySelectorAll(".field-error").forEach((slot) => { slot.hidden = true; slot.textContent = ""; });
  form.querySelectorAll("[aria-invalid]").forEach((input) => input.removeAttribute("aria-invalid"));
  const general = document.getElementById(`${prefix}-error`);
  general.hidden = true;
  general.textContent = "";
}

function fieldError(prefix, name, message) {
  return new HubRequestError(400, { error: { code: "invalid", message, fields: { [name]: [message] } } });
}

async function postForm(url, formData) {
  let response;
  try {
    response = await fetch(url, { method: "POST", credentials: "same-origin", body: formData,
      headers: { Accept: "application/json", "X-CSRFToken": csrfToken() } });
  } catch {
    throw new HubRequestError(0, { error: { code: "offline", message: "The hub cannot be reached right now." } });
  }
  let body = null;
  try { body = await response.json(); } catch { body = null; }
  if (!response.ok) throw new HubRequestError(response.status, body);
  return body;
}

const importForm = document.getElementById("import-form");
importForm.addEventListener("submit", async (event) => {
  event.preventDefault();
  clearErrors(importForm, "import");
  const button = document.getElementById("import-submit");
  const file = document.getElementById("import-file").files[0];
  const maxMb = Number(page.dataset.maxImportMb);
  try {
    if (!file) throw fieldError("import", "file", "choose the export file to import");
    if (maxMb && file.size > maxMb * 1024 * 1024) throw fieldError("import", "file", `at most ${maxMb} MB`);
    const data = new FormData();
    data.append("kind", "import");
    data.append("format", document.getElementById("import-format").value);
    data.append("file", file);
    button.disabled = true;
    button.textContent = "Uploading…";
    upsert(await postForm(API, data));
    importForm.reset();
  } catch (error) {
    showErrors(importForm, "import", error);
  } finally {
    button.disabled = false;
    button.textContent = "Import";
  }
});

const exportForm = document.getElementById("export-form");
exportForm.addEventListener("submit", async (event) => {
  event.preventDefault();
  clearErrors(exportForm, "export");
  const button = document.getElementById("export-submit");
  const [kind, id] = document.getElementById("export-scope").value.split(":");
  const body = { kind: "export", format: document.getElementById("export-format").value };
  if (kind === "chat") body.chat_id = id;
  if (kind === "folder") body.folder_id = Number(id);
  button.disabled = true;
  try {
    upsert(await postJSON(API, body));
  } catch (error) {
    showErrors(exportForm, "export", error);
  } finally {
    button.disabled = false;
  }
});

list.addEventListener("click", async (event) => {
  const button = event.target.closest(".job-forget");
  if (!button) return;
  button.disabled = true;
  try {
    const response = await fetch(`${API}${button.dataset.id}/`, { method: "DELETE", credentials: "same-origin",
      headers: { Accept: "application/json", "X-CSRFToken": csrfToken() } });
    if (!response.ok && response.status !== 404) throw new Error(`The hub answered ${response.status}.`);
    jobs.delete(button.dataset.id);
    render();
  } catch (error) {
    status.textContent = error.message;
    button.disabled = false;
  }
});

more.addEventListener("click", async () => {
  more.disabled = true;
  status.textContent = "Loading…";
  try {
    const answer = await getJSON(`${API}?limit=${PAGE}&before=${encodeURIComponent(cursor)}`);
    answer.results.forEach((job) => jobs.set(job.id, job));
    cursor = answer.next_cursor;
    status.textContent = "";
    render();
  } catch (error) {
    status.textContent = `Could not load older jobs: ${error.message}`;
  } finally {
    more.disabled = false;
  }
});

// --- Start ------------------------------------------------------------------------------------

const initial = JSON.parse(document.getElementById("transfer-jobs-data").textContent);
initial.forEach((job) => jobs.set(job.id, job));
cursor = initial.length >= PAGE ? initial[initial.length - 1].created_at : null;
render();

async function refreshRunning() {
  for (const job of [...jobs.values()].filter((j) => j.status === "queued" || j.status === "running")) {
    try { upsert(await getJSON(`${API}${job.id}/`)); } catch { /* polled again */ }
  }
}

const socket = new Connection("/ws/directory/", {
  onEvent: (event) => { if (event.type === "transfer.updated") upsert(event.transfer); },
  onOpen: () => refreshRunning(), // what changed before the socket was up, or while it was down
});
socket.start();
