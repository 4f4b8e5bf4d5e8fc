// A classic script in <head>: apply the stored theme before the first paint (no flash).
(function () {
  try {
    var theme = localStorage.getItem("hub-theme");
    if (theme === "light" || theme === "dark") document.documentElement.dataset.theme = theme;
  } catch (e) { /* storage off: the system's theme */ }
})();
