// Admin forms that change something irreversible ask first: a form with data-confirm="question"
// submits only once the user agrees. A module instead of an onsubmit attribute, so the admin's CSP
// allows no inline script.
document.addEventListener("submit", (event) => {
  const form = event.target;
  if (!(form instanceof HTMLFormElement) || !form.dataset.confirm) return;
  if (!window.confirm(form.dataset.confirm)) event.preventDefault();
});
