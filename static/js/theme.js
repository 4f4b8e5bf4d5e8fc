// Light, dark or the system's choice, remembered in this browser. theme-init.js applies the
// stored choice before the first paint; this module offers the switch.

const KEY = "hub-theme";
const ORDER = ["system", "light", "dark"];
const LABELS = { system: "Theme: System", light: "Theme: Light", dark: "Theme: Dark" };
const ICONS = { system: "◐", light: "☀", dark: "☾" };

export function currentTheme() {
  try { return localStorage.getItem(KEY) || "system"; } catch { return "system"; }
}

export function applyTheme(theme) {
  if (theme === "system") document.documentElement.removeAttribute("data-theme");
  else document.documentElement.dataset.theme = theme;
  try {
    if (theme === "system") localStorage.removeItem(KEY); else localStorage.setItem(KEY, theme);
  } catch { /* not remembered, still applied */ }
}

export function themeButton(button) {
  const show = () => {
    const theme = currentTheme();
    button.textContent = `${ICONS[theme]} ${LABELS[theme].split(": ")[1]}`;
    button.setAttribute("aria-label", `${LABELS[theme]}. Switch theme`);
  };
  button.addEventListener("click", () => {
    applyTheme(ORDER[(ORDER.indexOf(currentTheme()) + 1) % ORDER.length]);
    show();
  });
  show();
  return button;
}
