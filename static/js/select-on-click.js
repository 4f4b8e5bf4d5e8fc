// A read-only field the user is meant to copy (a new API token, shown once): one click selects all
// of it. Markup opts in with data-select-on-click; no inline handler, so the page's CSP holds.
for (const field of document.querySelectorAll("[data-select-on-click]")) {
  field.addEventListener("click", () => field.select());
}
