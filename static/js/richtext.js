// Math and highlighted code in messages. markdown.js leaves each formula as a span holding its TeX
// as text (data-math) and each fenced block as code with its language; here KaTeX and
// highlight.js turn them into their markup. Both build it from the text (KaTeX with trust off, so
// no \href or \includegraphics), never from a reply's HTML, and set styles through the DOM, which
// the Content-Security-Policy allows. The libraries are loaded the first time a message needs
// them, so a page without math or code never fetches them.

const KATEX_CSS = new URL("../vendor/katex/katex.min.css", import.meta.url).href;
const MAX_HIGHLIGHTED = 50_000; // characters: a longer block stays plain
const KATEX_OPTIONS = { throwOnError: false, trust: false, output: "html", strict: "ignore", maxSize: 40, maxExpand: 500 };

let katex = null;
let hljs = null;
let katexLoading = null;
let hljsLoading = null;

function needs(root) {
  return {
    math: Boolean(root.querySelector("span[data-math]:not(.math-done)")),
    code: Boolean(root.querySelector("pre code[class*='language-']:not(.hljs)")),
  };
}

function loadKatex() {
  if (!document.querySelector(`link[href="${KATEX_CSS}"]`)) {
    document.head.append(Object.assign(document.createElement("link"), { rel: "stylesheet", href: KATEX_CSS }));
  }
  katexLoading = katexLoading || import("../vendor/katex/katex.js").then((module) => { katex = module.default; });
  return katexLoading;
}

function loadHighlighter() {
  hljsLoading = hljsLoading || import("../vendor/highlight/highlight.js").then((module) => { hljs = module.default; });
  return hljsLoading;
}

function renderMath(root) {
  for (const span of root.querySelectorAll("span[data-math]:not(.math-done)")) {
    const tex = span.textContent;
    katex.render(tex, span, { ...KATEX_OPTIONS, displayMode: span.dataset.math === "display" });
    span.classList.add("math-done");
    span.title = tex; // the source, for copying
  }
}

function highlightCode(root) {
  for (const code of root.querySelectorAll("pre code[class*='language-']:not(.hljs)")) {
    const language = [...code.classList].find((c) => c.startsWith("language-"))?.slice(9);
    if (!language || !hljs.getLanguage(language) || code.textContent.length > MAX_HIGHLIGHTED) continue;
    hljs.highlightElement(code);
  }
}

// Render the math and code of a freshly made message body. What is not loaded yet is rendered in
// every message on the page once it is.
export function enhanceRichText(root) {
  const want = needs(root);
  if (want.math && katex) renderMath(root);
  if (want.code && hljs) highlightCode(root);
  const waits = [...(want.math && !katex ? [loadKatex()] : []), ...(want.code && !hljs ? [loadHighlighter()] : [])];
  if (!waits.length) return;
  Promise.all(waits).then(() => {
    for (const body of document.querySelectorAll(".msg-content")) {
      if (katex) renderMath(body);
      if (hljs) highlightCode(body);
    }
  }).catch(() => { /* shown as plain text and code */ });
}
