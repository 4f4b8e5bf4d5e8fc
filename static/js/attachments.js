// Files in the composer and in messages. The tray uploads each file as soon as it is chosen,
// dropped or pasted (XMLHttpRequest, for its upload progress), shows a chip per file (name, size,
// a thumbnail for an image, progress, then "reading… 12 pages" as the hub reads its text) and
// lets a file be taken off before the send. A sent message shows its files: images inline (a
// click opens them large), other files as cards that download.

import { csrfToken, postJSON } from "./net.js";
import { h, lineIcon, toast } from "./ui.js";

export function paperclipIcon() {
  return lineIcon("M21 11.5l-8.5 8.5a5.5 5.5 0 0 1-7.8-7.8l9-9a3.7 3.7 0 0 1 5.2 5.2l-9 9a1.8 1.8 0 0 1-2.6-2.6l8.3-8.3",
    { viewBox: "0 0 24 24", size: "16", width: "2" });
}

function docIcon() {
  return lineIcon("M6 2h8l5 5v15H6z M14 2v5h5 M9 13h7 M9 17h7", { viewBox: "0 0 24 24", size: "20", width: "1.6", cls: "file-icon" });
}

export function sizeLabel(bytes) {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${Math.round(bytes / 1024)} KB`;
  return `${(bytes / (1024 * 1024)).toFixed(bytes < 10 * 1024 * 1024 ? 1 : 0)} MB`;
}

// What a file's text status says on its chip and card.
export function readingLabel(file) {
  if (file.image) return "";
  if (file.text_status === "reading") return file.pages ? `reading… ${file.pages} pages` : "reading…";
  if (file.text_status === "pending") return "waiting to be read";
  if (file.text_status === "unreadable") return `could not read (${file.text_note})`;
  return file.pages > 1 ? `read · ${file.pages} pages` : "read";
}

export class FileTray {
  constructor({ uploadUrl, limits }) {
    this.uploadUrl = uploadUrl;
    this.limits = limits;
    this.items = [];
    this.element = h("ul", { class: "file-tray", "aria-label": "Files to send", hidden: true });
    this.onChange = () => {};
  }

  get busy() { return this.items.some((item) => item.state === "uploading"); }

  get ids() { return this.items.filter((item) => item.file).map((item) => item.file.id); }

  add(fileList) {
    for (const blob of fileList) {
      if (this.items.length >= 10) { toast("At most 10 files per message.", { kind: "error" }); break; }
      const item = { blob, state: "uploading", progress: 0, file: null, error: "" };
      if (this.limits.max_upload_bytes && blob.size > this.limits.max_upload_bytes) {
        item.state = "failed";
        item.error = `larger than ${sizeLabel(this.limits.max_upload_bytes)}, the most a file may be`;
      } else {
        this.upload(item);
      }
      this.items.push(item);
    }
    this.render();
  }

  upload(item) {
    const form = new FormData();
    form.append("file", item.blob, item.blob.name || "pasted-image.png");
    const xhr = new XMLHttpRequest();
    item.xhr = xhr;
    xhr.open("POST", this.uploadUrl);
    xhr.setRequestHeader("X-CSRFToken", csrfToken());
    xhr.setRequestHeader("Accept", "application/json");
    xhr.upload.addEventListener("progress", (event) => {
      if (event.lengthComputable) { item.progress = event.loaded / event.total; this.render(); }
    });
    xhr.addEventListener("load", () => {
      let body = null;
      try { body = JSON.parse(xhr.responseText); } catch { body = null; }
      if (xhr.status === 201 && body?.files?.length) {
        item.state = "done";
        item.file = body.files[0];
      } else {
        item.state = "failed";
        item.error = body?.error?.message || `the hub answered ${xhr.status}`;
      }
      this.render();
    });
    xhr.addEventListener("error", () => { item.state = "failed"; item.error = "the hub cannot be reached"; this.render(); });
    xhr.send(form);
  }

  remove(item) {
    this.items = this.items.filter((other) => other !== item);
    if (item.state === "uploading") item.xhr?.abort();
    if (item.file) postJSON(`/files/${item.file.id}/remove/`).catch(() => {});
    if (item.thumb) URL.revokeObjectURL(item.thumb);
    this.render();
  }

  // file.updated from the hub: a chip's reading status.
  update(file) {
    const item = this.items.find((other) => other.file?.id === file.id);
    if (item) { item.file = file; this.render(); }
  }

  clear() {
    for (const item of this.items) if (item.thumb) URL.revokeObjectURL(item.thumb);
    this.items = [];
    this.render();
  }

  render() {
    this.onChange();
    this.element.hidden = !this.items.length;
    this.element.replaceChildren(...this.items.map((item) => this.chip(item)));
  }

  chip(item) {
    const isImage = /^image\/(png|jpeg|gif|webp)$/.test(item.blob.type);
    if (isImage && !item.thumb) item.thumb = URL.createObjectURL(item.blob);
    let status = "";
    if (item.state === "uploading") status = `uploading… ${Math.round(item.progress * 100)}%`;
    else if (item.state === "failed") status = `not uploaded: ${item.error}`;
    else status = readingLabel(item.file);
    return h("li", { class: `file-chip file-${item.state}`, dataset: { fileId: item.file?.id || "" } },
      item.thumb ? h("img", { class: "file-thumb", src: item.thumb, alt: "" }) : docIcon(),
      h("span", { class: "file-text" },
        h("span", { class: "file-name", text: item.blob.name || "pasted image" }),
        h("span", { class: "file-meta", text: [sizeLabel(item.blob.size), status].filter(Boolean).join(" · ") })),
      item.state === "uploading" ? h("progress", { max: "1", value: String(item.progress), "aria-label": "Upload progress" }) : null,
      h("button", { type: "button", class: "btn-ghost btn-small file-remove", "aria-label": `Remove ${item.blob.name || "file"}`,
        text: "×", onclick: () => this.remove(item) }));
  }
}

// A sent message's files: images inline, other files as download cards.
export function messageFiles(files, { onOpenImage }) {
  if (!files?.length) return null;
  return h("div", { class: "msg-files" }, ...files.map((file) => (file.image
    ? h("button", { type: "button", class: "msg-image", title: `${file.name} · open it large`, onclick: () => onOpenImage(file) },
      h("img", { src: file.url, alt: file.name, loading: "lazy" }))
    : h("a", { class: "file-card", href: `${file.url}?download=1`, download: file.name, dataset: { fileId: file.id } },
      docIcon(),
      h("span", { class: "file-text" }, h("span", { class: "file-name", text: file.name }),
        h("span", { class: "file-meta", text: [sizeLabel(file.size), readingLabel(file)].filter(Boolean).join(" · ") }))))));
}

// An image opened large, over the page; Esc or a click closes it.
export function openImage(file) {
  const dialog = h("dialog", { class: "image-view", "aria-label": file.name, onclick: () => dialog.close() },
    h("img", { src: file.url, alt: file.name }),
    h("p", { class: "image-caption" }, h("span", { text: file.name }), " · ",
      h("a", { href: `${file.url}?download=1`, download: file.name, text: "Download", onclick: (event) => event.stopPropagation() })));
  dialog.addEventListener("close", () => dialog.remove());
  document.body.append(dialog);
  dialog.showModal();
}
