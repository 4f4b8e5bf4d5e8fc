// The new-chat state (the hub's home): pick the agents, write the first message. The chat is
// made only when that message is sent (or "Create empty chat" is pressed), as with threads.

import { Composer } from "./composer.js";
import { postJSON } from "./net.js";
import { avatar, h, temporaryMark, toast } from "./ui.js";

const PICKS_KEY = "hub-new-chat-agents";

function rememberedPicks(agents) {
  try {
    const stored = JSON.parse(localStorage.getItem(PICKS_KEY) || "null");
    if (Array.isArray(stored)) return new Set(stored.filter((id) => agents.some((a) => a.id === id)));
  } catch { /* fall through to the default */ }
  // A fresh hub starts with the shared Assistant when a model provider is configured, otherwise
  // with the built-in Librarian, useful with no key.
  const shared = agents.filter((a) => a.shared);
  const first = shared.find((a) => a.name === "Assistant") || shared.find((a) => a.name === "Librarian");
  return new Set(first ? [first.id] : []);
}

export class NewChatView {
  constructor({ app, root, temporary = false }) {
    this.app = app;
    this.root = root;
    this.temporary = temporary;
    this.picked = rememberedPicks(app.agents);
    this.busy = false;
    this.build();
  }

  build() {
    const { app } = this;
    app.setTitle("New chat · Hub");
    this.composer = new Composer({
      limits: app.limits, draftKey: "hub-draft-new", allowNotes: false,
      placeholder: "Ask anything — your first message starts the chat",
      members: () => app.agents.filter((a) => this.picked.has(a.id)),
      onSend: (content) => this.create(content),
    });
    this.composer.setTarget("→ a new chat");
    this.title = h("input", { type: "text", id: "new-chat-title", maxlength: app.limits.title_chars, placeholder: "Named after today's date if left empty" });
    this.titleError = h("div", { class: "field-error", id: "new-chat-title-error", role: "alert" });
    this.picks = h("ul", { class: "agent-picks", "aria-label": "Agents to add" });
    this.renderPicks();
    const welcome = h("div", { class: "welcome" },
      h("h1", { class: "welcome-title", id: "welcome-title", tabindex: "-1", text: `What shall we work on, ${app.user.name}?` }),
      h("p", { class: "muted", text: "Choose who takes part, then write your first message. You can add or remove agents later." }),
      this.picks,
      this.suggestionsEl = this.suggestions(),
      app.agents.length ? null : h("p", { class: "muted" }, "No agents yet. ", h("a", { href: app.urls.new_agent, text: "Create one" }), "."),
      h("details", { class: "new-chat-more" },
        h("summary", { text: "Name the chat" }),
        h("div", { class: "field" }, h("label", { for: "new-chat-title", text: "Title" }), this.title, this.titleError)),
      h("div", { class: "welcome-actions" },
        h("button", { type: "button", class: "btn btn-ghost btn-small", text: "Create an empty chat", onclick: () => this.create(null) }),
        h("a", { class: "btn btn-ghost btn-small", href: app.urls.agents, text: "Manage agents" })));
    this.temporaryToggle = h("button", { type: "button", class: "btn btn-ghost btn-small temporary-toggle",
      id: "temporary-toggle", "aria-pressed": String(this.temporary), title: "Temporary chat (Ctrl+Shift+T)",
      onclick: () => this.setTemporary(!this.temporary) }, temporaryMark(), h("span", { text: "Temporary" }));
    this.temporaryNote = h("p", { class: "temporary-note", id: "temporary-note", role: "status" });
    welcome.append(this.temporaryNote);
    const header = h("header", { class: "chat-header" }, app.sidebarButton(),
      h("div", { class: "chat-titles" }, this.headerTitle = h("p", { class: "chat-title-small", text: "New chat" })),
      this.temporaryToggle);
    this.setTemporary(this.temporary);
    this.suggestionsEl.hidden = !this.librarianPicked();
    this.root.replaceChildren(header, h("div", { class: "conversation welcome-wrap" }, welcome),
      h("div", { class: "composer-wrap" }, this.composer.element));
  }

  // A few things to ask the Librarian, put into the composer (not sent): a first visit is not a
  // blank page. Shown while the Librarian is picked.
  suggestions() {
    const ideas = ["List my chats", "What do you remember about me?", "Remember that I prefer short answers"];
    return h("div", { class: "suggestions", role: "group", "aria-label": "Things to try" },
      h("span", { class: "suggestions-label", "aria-hidden": "true", text: "Try" }),
      ...ideas.map((idea) => h("button", { type: "button", class: "suggestion", text: idea, onclick: () => {
        this.composer.input.value = idea;
        this.composer.autosize();
        this.composer.focus();
      } })));
  }

  // A temporary chat is kept out of the database until it is saved, and goes a while after its
  // last message (HUB_TEMPORARY_HOURS).
  setTemporary(on) {
    this.temporary = on;
    this.temporaryToggle.setAttribute("aria-pressed", String(on));
    this.headerTitle.textContent = on ? "New temporary chat" : "New chat";
    this.root.classList.toggle("is-temporary", on);
    this.temporaryNote.textContent = on
      ? `Temporary chat: not stored in the database, and gone ${this.app.limits.temporary_hours} hours after its last message, unless you save it. Agents do not change your memory from it.`
      : "";
    this.composer.setTarget(on ? "→ a new temporary chat" : "→ a new chat");
    this.app.setTitle(on ? "New temporary chat · Hub" : "New chat · Hub");
  }

  renderPicks() {
    this.picks.replaceChildren(...this.app.agents.map((agent) => {
      const on = this.picked.has(agent.id);
      return h("li", {}, h("button", { type: "button", class: "agent-pick", "aria-pressed": String(on),
        title: agent.description || agent.name, onclick: () => this.toggle(agent) },
      avatar(agent.avatar, agent.name, "sm"), h("span", { class: "agent-pick-name", text: agent.name }),
      h("span", { class: "check", "aria-hidden": "true", text: on ? "✓" : "+" })));
    }));
  }

  toggle(agent) {
    if (this.picked.has(agent.id)) this.picked.delete(agent.id); else this.picked.add(agent.id);
    try { localStorage.setItem(PICKS_KEY, JSON.stringify([...this.picked])); } catch { /* not remembered */ }
    this.suggestionsEl.hidden = !this.librarianPicked();
    this.composer.updateAnswering();
    const focused = document.activeElement?.closest?.(".agent-pick") ? [...this.picks.querySelectorAll(".agent-pick")].indexOf(document.activeElement) : -1;
    this.renderPicks();
    if (focused >= 0) this.picks.querySelectorAll(".agent-pick")[focused]?.focus();
  }

  focus() {
    this.composer.focus();
  }

  librarianPicked() {
    return this.app.agents.some((a) => this.picked.has(a.id) && a.name === "Librarian" && a.shared);
  }

  // Returns false while a create is under way (the composer then keeps its text).
  create(content) {
    if (this.busy) return false;
    this.busy = true;
    this.titleError.textContent = "";
    postJSON(this.app.urls.create, { title: this.title.value, agents: [...this.picked], temporary: this.temporary })
      .then((state) => {
        try { localStorage.removeItem("hub-draft-new"); } catch { /* nothing kept */ }
        this.app.openChat(state, { push: true, firstMessage: content ? { content } : null });
      })
      .catch((error) => {
        this.busy = false;
        if (content) this.composer.recall(content);
        if (error.fields?.title) {
          this.root.querySelector(".new-chat-more").open = true;
          this.titleError.textContent = error.fields.title.join(" ");
          this.title.focus();
        } else {
          toast(`Could not start the chat: ${error.message}`, { kind: "error" });
        }
      });
    return true;
  }

  stop() {
    this.root.classList.remove("is-temporary");
  }
}

