// Small DOM helpers shared by every module of the chat page: an element builder, avatars,
// relative times, toasts and menus. Text is always set as text (never as HTML).

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") el.className = value;
    else if (key === "text") el.textContent = value;
    else if (key === "dataset") Object.assign(el.dataset, value);
    else if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

// Only http(s) images: an avatar or picture field may hold anything a user typed.
export function isImageUrl(value) {
  return typeof value === "string" && /^https?:\/\/\S+$/i.test(value.trim());
}

function hue(name) {
  let sum = 0;
  for (const ch of name || "?") sum = (sum * 31 + ch.codePointAt(0)) % 360;
  return sum;
}

export function initials(name) {
  const words = (name || "?").trim().split(/\s+/).filter(Boolean);
  return (words.length > 1 ? words[0][0] + words[1][0] : (words[0] || "?").slice(0, 2)).toUpperCase();
}

// An avatar: an image URL, an emoji, or the name's initials on a colour of its own.
export function avatar(picture, name, size = "md") {
  const el = h("span", { class: `avatar avatar-${size}`, "aria-hidden": "true" });
  if (isImageUrl(picture)) {
    el.append(h("img", { src: picture.trim(), alt: "", loading: "lazy", referrerpolicy: "no-referrer" }));
  } else if (picture && picture.trim()) {
    el.classList.add("avatar-emoji");
    el.textContent = [...picture.trim()].slice(0, 2).join("");
  } else {
    el.classList.add("avatar-initials");
    el.style.setProperty("--avatar-hue", hue(name));
    el.textContent = initials(name);
  }
  return el;
}

const RELATIVE = new Intl.RelativeTimeFormat(undefined, { numeric: "auto", style: "short" });
const CLOCK = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit" });
const DAY = new Intl.DateTimeFormat(undefined, { month: "short", day: "numeric" });
const FULL = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });

export function relativeTime(iso, now = Date.now()) {
  if (!iso) return "";
  const then = new Date(iso).getTime();
  const seconds = Math.round((then - now) / 1000);
  if (Math.abs(seconds) < 45) return "now";
  const minutes = Math.round(seconds / 60);
  if (Math.abs(minutes) < 60) return RELATIVE.format(minutes, "minute");
  const hours = Math.round(minutes / 60);
  if (Math.abs(hours) < 24) return RELATIVE.format(hours, "hour");
  const days = Math.round(hours / 24);
  if (Math.abs(days) < 7) return RELATIVE.format(days, "day");
  return DAY.format(new Date(iso));
}

// A compact time for tight places (the sidebar): now, 5m, 3h, Mon, 12 Oct.
const WEEKDAY = new Intl.DateTimeFormat(undefined, { weekday: "short" });
export function shortTime(iso, now = Date.now()) {
  if (!iso) return "";
  const seconds = Math.max(0, Math.round((now - new Date(iso).getTime()) / 1000));
  if (seconds < 60) return "now";
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m`;
  if (seconds < 86400) return `${Math.floor(seconds / 3600)}h`;
  if (seconds < 6 * 86400) return WEEKDAY.format(new Date(iso));
  return DAY.format(new Date(iso));
}

// "23 h", "40 min": how long a temporary chat has left.
export function timeLeft(iso, now = Date.now()) {
  const minutes = Math.max(0, Math.round((new Date(iso).getTime() - now) / 60000));
  return minutes >= 60 ? `${Math.round(minutes / 60)} h` : `${minutes} min`;
}

// A line icon drawn as SVG (an emoji shows as a box where no colour emoji font is installed).
export function lineIcon(d, { viewBox = "0 0 16 16", cls = "", size = null, width = "1.4" } = {}) {
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("viewBox", viewBox);
  if (cls) svg.setAttribute("class", cls);
  if (size) { svg.setAttribute("width", size); svg.setAttribute("height", size); }
  svg.setAttribute("aria-hidden", "true");
  const path = document.createElementNS("http://www.w3.org/2000/svg", "path");
  path.setAttribute("d", d);
  path.setAttribute("fill", "none");
  path.setAttribute("stroke", "currentColor");
  path.setAttribute("stroke-width", width);
  path.setAttribute("stroke-linecap", "round");
  path.setAttribute("stroke-linejoin", "round");
  svg.append(path);
  return svg;
}

// Line icons drawn as SVG: an emoji shows as an empty box where no colour emoji font is installed.
const ICON_PATHS = {
  chat: "M3 3.5h10a1 1 0 0 1 1 1v6a1 1 0 0 1-1 1H7l-3 2.5v-2.5H3a1 1 0 0 1-1-1v-6a1 1 0 0 1 1-1z",
  trash: "M2.5 4h11M6 4V2.5h4V4M4 4l.7 9.5h6.6L12 4M6.7 6.5v4.5M9.3 6.5v4.5",
  link: "M6.5 9.5l3-3M7 4.5l1.2-1.2a2.5 2.5 0 0 1 3.5 3.5L10.5 8M5.5 8L4.3 9.2a2.5 2.5 0 0 0 3.5 3.5L9 11.5",
  thumbUp: "M4.5 7v6.5H2.5V7zM4.5 7l2.5-5a1.6 1.6 0 0 1 2 1.8L8.5 6.5h4a1.3 1.3 0 0 1 1.3 1.6l-1.1 4.3a1.5 1.5 0 0 1-1.5 1.1H4.5",
  thumbDown: "M4.5 9V2.5H2.5V9zM4.5 9l2.5 5a1.6 1.6 0 0 0 2-1.8L8.5 9.5h4a1.3 1.3 0 0 0 1.3-1.6l-1.1-4.3a1.5 1.5 0 0 0-1.5-1.1H4.5",
};

export function icon(name, options = {}) {
  return lineIcon(ICON_PATHS[name], { cls: `icon icon-${name}`, ...options });
}

// A chat's picture: its own (an image or an emoji) or, without one, a speech bubble.
export function chatAvatar(chat, size) {
  if (chat.picture) return avatar(chat.picture, chat.title, size);
  return h("span", { class: `avatar avatar-${size} avatar-icon`, "aria-hidden": "true" }, icon("chat"));
}

// A temporary chat's mark: an hourglass.
export function temporaryMark() {
  return lineIcon("M4 1.5h8M4 14.5h8M5 1.5c0 3.5 6 3.5 6 6.5s-6 3-6 6.5M11 1.5c0 3.5-6 3.5-6 6.5s6 3 6 6.5",
    { cls: "temporary-mark" });
}

// "Temporary · expires in 23 h", or "" for a stored chat.
export function temporaryLabel(chat) {
  return chat.kind === "temporary" && chat.expires_at ? `Temporary · expires in ${timeLeft(chat.expires_at)}` : "";
}

export function clockTime(iso) {
  return iso ? CLOCK.format(new Date(iso)) : "";
}

export function fullTime(iso) {
  return iso ? FULL.format(new Date(iso)) : "";
}

// Relative times go stale; refresh them every half minute.
export function refreshTimes(root = document) {
  for (const el of root.querySelectorAll("time[data-relative]")) el.textContent = relativeTime(el.dateTime);
  for (const el of root.querySelectorAll("time[data-short]")) el.textContent = shortTime(el.dateTime);
}

// --- Screen readers: a polite live region for what happened out of sight ------------------

export function announce(text) {
  let region = document.getElementById("announcer");
  if (!region) {
    region = h("div", { id: "announcer", class: "visually-hidden", role: "status", "aria-live": "polite" });
    document.body.append(region);
  }
  // Emptied first, so the same words said twice are still read.
  region.textContent = "";
  setTimeout(() => { region.textContent = text; }, 60);
}

// --- Toasts ---------------------------------------------------------------------------------

export function toast(text, { action, onAction, kind = "info", timeout = 5000 } = {}) {
  const region = document.getElementById("toasts");
  const item = h("div", { class: `toast toast-${kind}` }, h("span", { text }));
  const close = () => item.remove();
  if (action) {
    item.append(h("button", { type: "button", class: "btn btn-small", text: action, onclick: () => { close(); onAction(); } }));
  }
  item.append(h("button", { type: "button", class: "btn-icon", "aria-label": "Dismiss", text: "×", onclick: close }));
  region.append(item);
  if (timeout) setTimeout(close, timeout);
  return item;
}

// --- Menus: a button that opens a list of actions; arrows move, Escape closes ---------------

let openMenu = null;

export function closeMenus() {
  if (!openMenu) return;
  const { menu, button } = openMenu;
  openMenu = null;
  menu.remove();
  button.setAttribute("aria-expanded", "false");
}

export function showMenu(button, items, { align = "end" } = {}) {
  if (openMenu && openMenu.button === button) { closeMenus(); return; }
  closeMenus();
  const menu = h("div", { class: `menu menu-${align}`, role: "menu" });
  for (const item of items) {
    if (item.separator) { menu.append(h("div", { class: "menu-sep", role: "separator" })); continue; }
    const el = item.href
      ? h("a", { role: "menuitem", href: item.href, class: "menu-item", tabindex: "-1", text: item.label })
      : h("button", { type: "button", role: "menuitem", class: `menu-item ${item.danger ? "danger" : ""}`,
        tabindex: "-1", disabled: item.disabled, text: item.label });
    if (item.onSelect) el.addEventListener("click", () => { closeMenus(); item.onSelect(); });
    menu.append(el);
  }
  menu.addEventListener("keydown", (event) => {
    const entries = [...menu.querySelectorAll(".menu-item:not([disabled])")];
    const index = entries.indexOf(document.activeElement);
    if (event.key === "ArrowDown") { event.preventDefault(); entries[(index + 1) % entries.length]?.focus(); }
    if (event.key === "ArrowUp") { event.preventDefault(); entries[(index - 1 + entries.length) % entries.length]?.focus(); }
    if (event.key === "Home") { event.preventDefault(); entries[0]?.focus(); }
    if (event.key === "End") { event.preventDefault(); entries.at(-1)?.focus(); }
    if (event.key === "Escape" || event.key === "Tab") { event.preventDefault(); closeMenus(); button.focus(); }
  });
  button.setAttribute("aria-expanded", "true");
  button.parentElement.classList.add("menu-anchor");
  button.after(menu);
  openMenu = { menu, button };
  menu.querySelector(".menu-item:not([disabled])")?.focus();
}

document.addEventListener("click", (event) => {
  if (openMenu && !openMenu.menu.contains(event.target) && !openMenu.button.contains(event.target)) closeMenus();
});

// A short text to show for a message in a preview line.
export function snippet(text, length = 120) {
  const flat = (text || "").replace(/[#*_`>~[\]]+/g, "").replace(/\s+/g, " ").trim();
  return flat.length > length ? `${flat.slice(0, length - 1)}…` : flat;
}
