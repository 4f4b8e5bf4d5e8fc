// The open chat's header: picture, title, description, members (add and remove agents), the
// connection state, and the chat's menu (rename and details, delete).

import { getJSON, postJSON } from "./net.js";
import { openShareDialog } from "./share.js";
import { avatar, chatAvatar, h, lineIcon, showMenu, temporaryLabel, temporaryMark, timeLeft, toast } from "./ui.js";

// A box with an arrow out of it: the Share button (its label hides at phone width).
const SHARE_ICON = "M8 10V2.5M5.2 5.2L8 2.5l2.8 2.7M4.5 7.5H3.5v6h9v-6h-1";

// Models that come from a provider (and so can be switched); the offline ones cannot.
const SWITCHABLE = /^(openai|anthropic|ollama):/;

function modelName(model) {
  return (model || "").replace(/^[a-z]+:/, "");
}

export class ChatHeader {
  constructor({ app, chatView }) {
    this.app = app;
    this.view = chatView;
    this.element = h("header", { class: "chat-header" });
    this.status = h("span", { class: "conn-status", role: "status", "aria-live": "polite" });
  }

  render() {
    const { chat, members } = this.view.model;
    const menuButton = h("button", { type: "button", class: "btn-icon", "aria-haspopup": "menu", "aria-expanded": "false",
      "aria-label": "Chat actions", text: "⋯" });
    const temporary = chat.kind === "temporary";
    menuButton.addEventListener("click", () => showMenu(menuButton, [
      { label: "Rename and details…", onSelect: () => this.openDetails() },
      { label: "New thread", onSelect: () => this.view.openThread(null) },
      ...(temporary ? [{ label: "Save this chat", onSelect: () => this.app.saveChat(chat) }] : []),
      // Export opens the Import and export page with this chat chosen.
      ...(temporary ? [] : [{ label: "Export…", href: `/transfers/?chat=${encodeURIComponent(chat.id)}` }]),
      { separator: true },
      { label: temporary ? "Delete now" : "Delete chat", danger: true, onSelect: () => this.app.deleteChat(chat) },
    ]));
    const title = h("h1", { class: "chat-title", id: "chat-title", text: chat.title });
    const titles = h("div", { class: "chat-titles" }, title,
      temporary ? h("p", { class: "chat-temporary", id: "chat-temporary", title: temporaryLabel(chat) }, temporaryMark(),
        h("span", { class: "chat-temporary-label", text: temporaryLabel(chat) }),
        h("span", { class: "chat-temporary-short", text: `${timeLeft(chat.expires_at)} left` }),
        h("button", { type: "button", class: "btn btn-small save-chat", id: "save-chat", "aria-label": "Save this chat",
          onclick: () => this.app.saveChat(chat) },
        h("span", { class: "save-long", text: "Save this chat" }), h("span", { class: "save-short", text: "Save" }))) : null,
      chat.description ? h("p", { class: "chat-desc", text: chat.description }) : null);
    this.element.replaceChildren(
      this.app.sidebarButton(),
      chatAvatar(chat, "lg"),
      titles,
      this.membersElement(members),
      this.status,
      h("button", { type: "button", class: "btn btn-small share-chat", id: "share-chat", "aria-haspopup": "dialog",
        "aria-label": "Share", title: "Share a read-only link to this chat", onclick: () => openShareDialog({ chat }) },
      lineIcon(SHARE_ICON, { cls: "icon" }), h("span", { class: "share-label", text: "Share" })),
      menuButton,
    );
    this.app.setTitle(`${chat.title} · Hub`);
  }

  membersElement(members) {
    const list = h("ul", { class: `members ${members.length > 3 ? "compact" : ""}`, "aria-label": "Agents in this chat" });
    for (const member of members) {
      const button = h("button", { type: "button", class: "member", "aria-haspopup": "menu", "aria-expanded": "false",
        title: member.description || member.name, "aria-label": `${member.name} (agent)` },
      avatar(member.avatar, member.name, "sm"),
      h("span", { class: "member-text" }, h("span", { class: "member-name", text: member.name }),
        member.model ? h("span", { class: "member-model", text: modelName(member.model) }) : null));
      const switchable = member.owned && SWITCHABLE.test(member.model || "");
      button.addEventListener("click", () => showMenu(button, [
        { label: `Mention ${member.name}`, onSelect: () => this.view.composer?.recallMention(member) },
        ...(switchable ? [{ label: `Model: ${modelName(member.model)} — switch…`, onSelect: () => this.pickModel(member) }] : []),
        { label: "Remove from chat", danger: true, onSelect: () => this.removeMember(member) },
      ], { align: "start" }));
      list.append(h("li", {}, button));
    }
    const add = h("button", { type: "button", class: "btn-ghost btn-small add-member", "aria-haspopup": "menu",
      "aria-expanded": "false", text: members.length ? "+ Add" : "+ Add an agent" });
    add.addEventListener("click", () => {
      const memberIds = new Set(members.map((m) => m.id));
      const candidates = this.app.agents.filter((a) => !memberIds.has(a.id));
      showMenu(add, [
        ...candidates.map((agent) => ({ label: agent.name, onSelect: () => this.addMember(agent) })),
        ...(candidates.length ? [{ separator: true }] : []),
        { label: "Create an agent…", href: this.app.urls.new_agent },
      ]);
    });
    list.append(h("li", {}, add));
    return list;
  }

  async addMember(agent) {
    try {
      const answer = await postJSON(`/chats/${this.view.model.chat.id}/members/`, { agent_id: agent.id });
      this.view.setMembers(answer.members);
      toast(`${agent.name} joined the chat.`);
    } catch (error) {
      toast(`Could not add ${agent.name}: ${error.message}`, { kind: "error" });
    }
  }

  // The model picker: the models the agent's provider offers (cached; Refresh asks again), or a
  // typed name for a provider that cannot list them.
  async pickModel(member) {
    const list = h("datalist", { id: "model-picker-choices" });
    const input = h("input", { id: "model-picker-input", type: "text", list: "model-picker-choices", autocomplete: "off",
      spellcheck: "false", "aria-describedby": "model-picker-note" });
    input.value = member.model;
    const note = h("p", { id: "model-picker-note", class: "muted", "aria-live": "polite", text: "Asking the provider…" });
    const options = h("ul", { class: "model-options", role: "listbox", "aria-label": "Models offered" });
    const load = async (refresh) => {
      note.textContent = "Asking the provider…";
      try {
        const answer = await getJSON(`/agents/models/?agent=${member.id}${refresh ? "&refresh=1" : ""}`);
        list.replaceChildren(...answer.models.map((model) => h("option", { value: model })));
        options.replaceChildren(...answer.models.map((model) => h("li", {}, h("button", {
          type: "button", class: `model-option${model === member.model ? " current" : ""}`, role: "option",
          "aria-selected": model === member.model ? "true" : "false", text: modelName(model),
          onclick: () => { input.value = model; form.requestSubmit(); } }))));
        note.textContent = answer.models.length ? `${answer.models.length} offered by the provider.`
          : `The provider listed none${answer.error ? `: ${answer.error}` : ""}. Type a model's name.`;
      } catch (error) {
        note.textContent = `Could not ask the provider: ${error.message}. Type a model's name.`;
      }
    };
    const form = h("form", { method: "dialog", class: "dialog-form" },
      h("h2", { id: "model-picker-title", text: `Model for ${member.name}` }), options,
      h("div", { class: "field" }, h("label", { for: "model-picker-input", text: "Or type one (provider:model)" }), input, list,
        h("div", { class: "field-error", id: "model-picker-error", role: "alert" })),
      note,
      h("div", { class: "dialog-actions" },
        h("button", { type: "button", class: "btn btn-ghost", text: "Refresh the list", onclick: () => load(true) }),
        h("button", { type: "button", class: "btn btn-ghost", text: "Cancel", onclick: () => dialog.close() }),
        h("button", { type: "submit", class: "btn btn-primary", text: "Switch" })));
    const dialog = h("dialog", { class: "dialog", "aria-labelledby": "model-picker-title" }, form);
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      try {
        const answer = await postJSON(`/agents/${member.id}/model/`, { model: input.value.trim() });
        this.view.setMembers(this.view.model.members.map((m) => (m.id === member.id ? { ...m, model: answer.agent.model } : m)));
        toast(`${member.name} now answers with ${modelName(answer.agent.model)}.`);
        dialog.close();
      } catch (error) {
        form.querySelector("#model-picker-error").textContent = error.fields?.model?.join(" ") || error.message;
        input.focus();
      }
    });
    dialog.addEventListener("close", () => dialog.remove());
    document.body.append(dialog);
    dialog.showModal();
    load(false);
  }

  async removeMember(member) {
    try {
      const answer = await postJSON(`/chats/${this.view.model.chat.id}/members/${member.id}/remove/`);
      this.view.setMembers(answer.members);
      toast(`${member.name} left the chat. Their messages stay.`);
    } catch (error) {
      toast(`Could not remove ${member.name}: ${error.message}`, { kind: "error" });
    }
  }

  setConnection(status, detail = {}) {
    const labels = { connecting: "Connecting…", offline: "Offline — reconnecting", closed: "Disconnected", open: "" };
    let text = labels[status] ?? "";
    if (status === "offline" && detail.retryAt) {
      const seconds = Math.max(1, Math.round((detail.retryAt - Date.now()) / 1000));
      text = `Offline — retrying in ${seconds} s`;
    }
    this.status.textContent = text;
    this.status.dataset.state = status;
  }

  // The details dialog: title, description and picture, each error shown beside its field.
  openDetails() {
    const { chat } = this.view.model;
    const field = (name, label, value, multiline = false) => {
      const input = multiline
        ? h("textarea", { id: `chat-field-${name}`, name, rows: "3", "aria-describedby": `chat-field-${name}-error` })
        : h("input", { id: `chat-field-${name}`, name, type: "text", maxlength: name === "title" ? this.app.limits.title_chars : 500,
          "aria-describedby": `chat-field-${name}-error` });
      input.value = value || "";
      return h("div", { class: "field" }, h("label", { for: `chat-field-${name}`, text: label }), input,
        h("div", { class: "field-error", id: `chat-field-${name}-error`, role: "alert" }));
    };
    const form = h("form", { method: "dialog", class: "dialog-form" },
      h("h2", { text: "Chat details" }),
      field("title", "Title", chat.title),
      field("description", "Description", chat.description, true),
      field("picture", "Picture (an emoji or an image URL)", chat.picture),
      h("div", { class: "dialog-actions" },
        h("button", { type: "button", class: "btn btn-ghost", value: "cancel", text: "Cancel", onclick: () => dialog.close() }),
        h("button", { type: "submit", class: "btn btn-primary", text: "Save" })));
    const dialog = h("dialog", { class: "dialog", "aria-labelledby": "details-title" }, form);
    form.querySelector("h2").id = "details-title";
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const body = Object.fromEntries(new FormData(form));
      form.querySelectorAll(".field-error").forEach((el) => { el.textContent = ""; });
      try {
        const answer = await postJSON(`/chats/${chat.id}/settings/`, body);
        this.view.setChat(answer.chat);
        dialog.close();
      } catch (error) {
        const names = Object.keys(error.fields || {});
        for (const name of names) {
          const slot = form.querySelector(`#chat-field-${name}-error`);
          if (slot) slot.textContent = error.fields[name].join(" ");
        }
        if (!names.length) toast(error.message, { kind: "error" });
        form.querySelector(`#chat-field-${names[0] || "title"}`)?.focus();
      }
    });
    // showModal() gives focus back to the menu's button when the dialog closes.
    dialog.addEventListener("close", () => dialog.remove());
    document.body.append(dialog);
    dialog.showModal();
    form.querySelector("#chat-field-title").select();
  }
}
