// The agent form offers the models its provider has: the model field's list is filled from
// /agents/models/ for the provider the field names (all three when it names none) at the base
// URL given, and says when a server cannot list them (a typed name still works).

const field = document.getElementById("id_model");
const baseUrl = document.getElementById("id_base_url");
const choices = document.getElementById("model-choices");
const status = document.getElementById("model-offer");
const PROVIDERS = ["openai", "anthropic", "ollama"];
let asked = "";

async function offered(provider, refresh) {
  const params = new URLSearchParams({ provider, base_url: baseUrl?.value.trim() || "" });
  if (refresh) params.set("refresh", "1");
  try {
    const response = await fetch(`/agents/models/?${params}`, { credentials: "same-origin", headers: { Accept: "application/json" } });
    return response.ok ? await response.json() : { models: [], error: "the hub did not answer" };
  } catch {
    return { models: [], error: "the hub cannot be reached" };
  }
}

async function fill({ refresh = false } = {}) {
  const named = field.value.includes(":") ? field.value.split(":")[0] : "";
  const providers = PROVIDERS.includes(named) ? [named] : PROVIDERS;
  const key = `${providers.join(",")}|${baseUrl?.value.trim() || ""}`;
  if (key === asked && !refresh) return;
  asked = key;
  const answers = await Promise.all(providers.map((provider) => offered(provider, refresh)));
  if (key !== asked) return; // the field changed meanwhile
  const models = answers.flatMap((answer) => answer.models);
  choices.replaceChildren(...models.map((model) => Object.assign(document.createElement("option"), { value: model })));
  const refreshButton = Object.assign(document.createElement("button"), { type: "button", className: "link", textContent: "Refresh" });
  refreshButton.addEventListener("click", () => fill({ refresh: true }));
  const errors = answers.filter((answer) => answer.error && providers.length === 1).map((answer) => answer.error);
  const text = models.length ? `${models.length} model${models.length === 1 ? "" : "s"} offered: pick one from the list, or type a name. `
    : errors.length ? `The list is empty: ${errors[0]}. Type the model's name. ` : "No provider listed its models here: type the model's name. ";
  status.replaceChildren(document.createTextNode(text), refreshButton);
  status.hidden = false;
}

field.addEventListener("input", () => fill());
baseUrl?.addEventListener("change", () => fill());
fill();
