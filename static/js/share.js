// The chat's Share dialog: make a read-only link to a snapshot of the chat (notes and memory only
// if chosen), copy it, and see and revoke this chat's links. A link made or revoked in another
// tab shows here too (share.updated, relayed by hub.js as the window event "hub:share-updated").

import { HubRequestError, getJSON, postJSON } from "./net.js";
import { fullTime, h, relativeTime, toast } from "./ui.js";

const SHARED_LINKS_PAGE = "/shares/";

function absolute(path) {
  return new URL(path, location.origin).href;
}

async function copyText(button, text) {
  const label = button.textContent;
  try {
    await navigator.clipboard.writeText(text);
    button.textContent = "Copied";
  } catch {
    button.textContent = "Select and copy";
  }
  setTimeout(() => { button.textContent = label; }, 1800);
}

function linkField(share, id) {
  return h("input", { type: "text", id, class: "share-url", readonly: true, value: absolute(share.url),
    "aria-label": "Link to the shared chat", onfocus: (event) => event.target.select() });
}

function extras(share) {
  const parts = [share.include_notes ? "notes" : "", share.include_memory ? "memory" : ""].filter(Boolean);
  return parts.length ? ` · with ${parts.join(" and ")}` : "";
}

class ShareDialog {
  constructor({ chat }) {
    this.chat = chat;
    this.links = [];
    this.nextCursor = null;
    this.temporary = chat.kind === "temporary";
    this.build();
  }

  build() {
    const notes = h("input", { type: "checkbox", id: "share-notes", name: "include_notes" });
    const memory = h("input", { type: "checkbox", id: "share-memory", name: "include_memory" });
    this.error = h("div", { class: "field-error", id: "share-error", role: "alert" });
    this.created = h("div", { class: "share-created", id: "share-created", hidden: true, "aria-live": "polite" });
    this.createButton = h("button", { type: "submit", class: "btn btn-primary", id: "share-create", text: "Create link",
      disabled: this.temporary });
    this.list = h("ul", { class: "share-list", id: "share-links", "aria-label": "Links to this chat" });
    this.listState = h("p", { class: "muted share-list-state", id: "share-links-state", role: "status" });
    this.more = h("button", { type: "button", class: "btn-ghost btn-small", text: "Show older links", hidden: true,
      onclick: () => this.load({ older: true }) });
    const form = h("form", { method: "dialog", class: "dialog-form share-form" },
      h("h2", { id: "share-title", text: "Share a read-only copy" }),
      h("p", { class: "muted share-intro", text: "Anyone with the link can read this chat as it is now, without logging in. "
        + "Messages sent later are not in it. Notes and memory stay private unless you include them." }),
      this.temporary ? h("p", { class: "error", id: "share-temporary", role: "alert",
        text: "A temporary chat cannot be shared: save it first." }) : null,
      h("div", { class: "share-options" },
        h("label", { class: "check" }, notes, " Include the chat's notes"),
        h("label", { class: "check" }, memory, " Include your shared memory (what agents remember across chats)")),
      this.error,
      h("div", { class: "dialog-actions share-make" }, this.createButton),
      this.created,
      h("h3", { class: "share-heading", text: "Links to this chat" }),
      this.listState, this.list, this.more,
      h("div", { class: "dialog-actions" },
        h("a", { class: "btn btn-ghost", href: SHARED_LINKS_PAGE, text: "All shared links" }),
        h("button", { type: "button", class: "btn", text: "Close", onclick: () => this.dialog.close() })));
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.create({ include_notes: notes.checked, include_memory: memory.checked });
    });
    this.dialog = h("dialog", { class: "dialog share-dialog", id: "share-dialog", "aria-labelledby": "share-title" }, form);
    this.onLive = (event) => {
      const share = event.detail?.share;
      if (share?.chat_id === this.chat.id) this.load();
    };
    window.addEventListener("hub:share-updated", this.onLive);
    this.dialog.addEventListener("close", () => {
      window.removeEventListener("hub:share-updated", this.onLive);
      this.dialog.remove();
    });
  }

  open() {
    document.body.append(this.dialog);
    this.dialog.showModal();
    this.load();
  }

  async create(options) {
    this.error.textContent = "";
    this.createButton.disabled = true;
    this.createButton.textContent = "Creating…";
    try {
      const answer = await postJSON(`/chats/${this.chat.id}/shares/`, options);
      this.showCreated(answer.share);
      this.upsert(answer.share);
      this.render();
    } catch (error) {
      const fields = Object.values(error.fields || {}).flat();
      this.error.textContent = fields.length ? fields.join(" ") : error.message;
    } finally {
      this.createButton.disabled = this.temporary;
      this.createButton.textContent = "Create link";
    }
  }

  showCreated(share) {
    const field = linkField(share, "share-new-url");
    const copy = h("button", { type: "button", class: "btn btn-small", id: "share-copy", text: "Copy link",
      onclick: () => { field.select(); copyText(copy, field.value); } });
    this.created.replaceChildren(
      h("p", { class: "share-created-note", text: "Link created. Copy it and send it to whoever should read the chat." }),
      h("div", { class: "share-url-row" }, field, copy,
        h("a", { class: "btn btn-small", href: share.url, target: "_blank", rel: "noopener noreferrer", text: "Open" })));
    this.created.hidden = false;
    field.focus();
  }

  upsert(share) {
    this.links = [share, ...this.links.filter((link) => link.id !== share.id)];
  }

  async load({ older = false } = {}) {
    if (this.temporary) {
      this.listState.textContent = "No links: a temporary chat is not shared.";
      return;
    }
    if (!older) {
      this.listState.textContent = "Loading links…";
      this.listState.hidden = false;
    }
    this.more.disabled = true;
    try {
      const cursor = older && this.nextCursor ? `?before=${encodeURIComponent(this.nextCursor)}` : "";
      const answer = await getJSON(`/chats/${this.chat.id}/shares/${cursor}`);
      this.links = older ? [...this.links, ...answer.results] : answer.results;
      this.nextCursor = answer.next_cursor;
      this.render();
    } catch (error) {
      this.list.replaceChildren();
      this.listState.replaceChildren(`Could not load the links: ${error.message} `,
        h("button", { type: "button", class: "link", text: "Try again", onclick: () => this.load() }));
      this.listState.classList.add("error");
      this.listState.hidden = false;
    } finally {
      this.more.disabled = false;
    }
  }

  render() {
    this.listState.classList.remove("error");
    this.listState.textContent = this.links.length ? "" : "No links to this chat yet.";
    this.listState.hidden = this.links.length > 0;
    this.list.replaceChildren(...this.links.map((share) => this.item(share)));
    this.more.hidden = !this.nextCursor;
  }

  item(share) {
    const copy = h("button", { type: "button", class: "btn-ghost btn-small", text: "Copy",
      "aria-label": `Copy the link made ${fullTime(share.created_at)}`, onclick: () => copyText(copy, absolute(share.url)) });
    const revoke = h("button", { type: "button", class: "btn-ghost btn-small danger share-revoke", text: "Revoke",
      "aria-label": `Revoke the link made ${fullTime(share.created_at)}`, onclick: () => this.revoke(share, revoke) });
    return h("li", { class: "share-row", dataset: { shareId: share.id } },
      h("span", { class: "share-text" },
        h("time", { datetime: share.created_at, title: fullTime(share.created_at),
          text: `Made ${relativeTime(share.created_at)}` }),
        h("span", { class: "muted", text: extras(share) })),
      h("span", { class: "share-actions" }, copy,
        h("a", { class: "btn-ghost btn-small", href: share.url, target: "_blank", rel: "noopener noreferrer", text: "Open" }),
        revoke));
  }

  async revoke(share, button) {
    button.disabled = true;
    try {
      await postJSON(`/shares/${share.id}/revoke/`);
      this.links = this.links.filter((link) => link.id !== share.id);
      if (this.created.querySelector("input")?.value === absolute(share.url)) this.created.hidden = true;
      this.render();
      toast("Link revoked: it shows nothing from now on.");
    } catch (error) {
      button.disabled = false;
      if (error instanceof HubRequestError && error.status === 404) {
        this.load();  // already gone (revoked in another tab)
        return;
      }
      toast(`Could not revoke the link: ${error.message}`, { kind: "error" });
    }
  }
}

export function openShareDialog({ chat }) {
  new ShareDialog({ chat }).open();
}
