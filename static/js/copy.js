// Copy buttons: <button data-copy="field-id"> copies that field's value to the clipboard.
// A module, not inline handlers, so the page works under a Content-Security-Policy without
// 'unsafe-inline'. Where the clipboard is not available (plain http off localhost) the text is
// selected and the button says to press Ctrl+C.

function selectAll(field) {
  field.focus();
  field.select();
}

async function copyFrom(button) {
  const field = document.getElementById(button.dataset.copy);
  if (!field) return;
  selectAll(field);
  const label = button.dataset.label || button.textContent;
  button.dataset.label = label;
  try {
    await navigator.clipboard.writeText(field.value);
    button.textContent = "Copied";
  } catch {
    button.textContent = "Press Ctrl+C to copy";
  }
  setTimeout(() => { button.textContent = label; }, 2500);
}

for (const button of document.querySelectorAll("button[data-copy]")) {
  button.addEventListener("click", () => copyFrom(button));
  const field = document.getElementById(button.dataset.copy);
  field?.addEventListener("focus", () => field.select());
}
