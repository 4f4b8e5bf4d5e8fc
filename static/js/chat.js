// The chat page: live messages over the websocket, optimistic sending, catch-up after reconnect.
// Content is shown as text (textContent), never as HTML: agent output is untrusted.

const initial = JSON.parse(document.getElementById("chat-initial").textContent);
const chatId = initial.chat.id;
const list = document.getElementById("messages");
const form = document.getElementById("composer");
const input = document.getElementById("composer-input");
const errorBox = document.getElementById("composer-error");
const status = document.getElementById("connection");

const rendered = new Map(); // message id -> element
const pending = new Map(); // client_id -> element
let lastId = 0;
let socket = null;
let retryDelay = 500;

for (const el of list.querySelectorAll("[data-message-id]")) {
  const id = Number(el.dataset.messageId);
  rendered.set(id, el);
  lastId = Math.max(lastId, id);
}

function senderName(message) {
  return message.sender.type === "agent" ? `${message.sender.avatar || ""} ${message.sender.name}`.trim() : "You";
}

function buildItem(message) {
  const li = document.createElement("li");
  const sender = document.createElement("span");
  sender.className = "sender";
  const content = document.createElement("div");
  content.className = "content";
  li.append(sender, content);
  fillItem(li, message);
  return li;
}

function fillItem(li, message) {
  li.className = `message kind-${message.kind} status-${message.status}`;
  li.dataset.messageId = message.id;
  li.querySelector(".sender").textContent = senderName(message);
  li.querySelector(".content").textContent = message.content;
}

function showMessage(message, clientId) {
  document.getElementById("empty")?.remove();
  const existing = rendered.get(message.id) || (clientId && pending.get(clientId));
  if (existing) {
    fillItem(existing, message);
    pending.delete(clientId);
    rendered.set(message.id, existing);
  } else {
    const li = buildItem(message);
    rendered.set(message.id, li);
    list.append(li);
  }
  lastId = Math.max(lastId, message.id);
  list.lastElementChild?.scrollIntoView({ block: "end" });
}

function applyDelta(event) {
  const li = rendered.get(event.message_id);
  if (!li || event.part !== "text") return;
  const content = li.querySelector(".content");
  const have = content.textContent.length;
  if (event.offset > have) { catchUp(); return; } // a gap: refetch the truth
  const fresh = event.text.slice(have - event.offset);
  if (fresh) content.textContent += fresh;
}

const handlers = {
  "message.created": (e) => showMessage(e.message, e.client_id),
  "message.edited": (e) => showMessage(e.message),
  "message.settled": (e) => showMessage(e.message),
  "message.delta": applyDelta,
  "chat.updated": (e) => { document.getElementById("chat-title").textContent = e.chat.title; },
  "chat.deleted": () => {
    setStatus("This chat was deleted.");
    form.querySelectorAll("textarea, button").forEach((el) => { el.disabled = true; });
  },
  error: (e) => {
    const el = e.client_id && pending.get(e.client_id);
    if (el) el.classList.add("failed");
    showError(e.error.message);
  },
};

function setStatus(text) { status.textContent = text; }
function showError(text) { errorBox.textContent = text; errorBox.hidden = !text; }

async function catchUp() {
  let more = true;
  while (more) {
    const response = await fetch(`/chats/${chatId}/messages/?after=${lastId}`, { credentials: "same-origin" });
    if (!response.ok) return;
    const page = await response.json();
    page.messages.forEach((m) => showMessage(m));
    more = page.has_more && page.messages.length > 0;
  }
}

function connect() {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  socket = new WebSocket(`${scheme}://${location.host}/ws/chats/${chatId}/`);
  socket.addEventListener("open", () => { retryDelay = 500; setStatus("Live"); catchUp(); });
  socket.addEventListener("message", (frame) => {
    const event = JSON.parse(frame.data);
    handlers[event.type]?.(event);
  });
  socket.addEventListener("close", (event) => {
    if (event.code === 4404 || event.code === 4410) { setStatus(event.code === 4410 ? "This chat was deleted." : "Chat not found."); return; }
    setStatus("Reconnecting…");
    setTimeout(connect, retryDelay);
    retryDelay = Math.min(retryDelay * 2, 10000);
  });
}

function send() {
  const content = input.value;
  if (!content.trim()) return;
  if (!socket || socket.readyState !== WebSocket.OPEN) { showError("Not connected yet; your text is kept."); return; }
  const clientId = crypto.randomUUID();
  const li = buildItem({ id: 0, kind: "message", status: "pending", content, sender: { type: "user" } });
  li.classList.add("pending");
  delete li.dataset.messageId;
  pending.set(clientId, li);
  document.getElementById("empty")?.remove();
  list.append(li);
  socket.send(JSON.stringify({ type: "message.send", content, client_id: clientId }));
  input.value = "";
  showError("");
}

form.addEventListener("submit", (event) => { event.preventDefault(); send(); });
input.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey) { event.preventDefault(); send(); }
});
document.getElementById("older")?.addEventListener("click", async (event) => {
  const oldest = Math.min(...rendered.keys());
  const response = await fetch(`/chats/${chatId}/messages/?before=${oldest}`, { credentials: "same-origin" });
  if (!response.ok) return;
  const page = await response.json();
  for (const message of page.messages.reverse()) {
    if (rendered.has(message.id)) continue;
    const li = buildItem(message);
    rendered.set(message.id, li);
    list.prepend(li);
  }
  if (!page.has_more) event.target.remove();
});

connect();
