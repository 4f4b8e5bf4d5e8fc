// Copy buttons: <button data-copy="field-id"> copies that field's value to the clipboard; listened
// for on the document, so rows a page replaces later keep working.
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

document.addEventListener("click", (event) => {
  const button = event.target.closest("button[data-copy]");
  if (button) copyFrom(button);
});
document.addEventListener("focusin", (event) => {
  if (event.target.matches?.("input[readonly]") && document.querySelector(`button[data-copy="${event.target.id}"]`)) {
    event.target.select();
  }
});
