// Markdown for messages. Agent output is untrusted: markdown-it runs with raw HTML off, and its
// output still goes through DOMPurify before it touches the page. Images are shown as links, so
// a reply cannot make the browser fetch a URL (a known way to leak a conversation).

import MarkdownIt from "../vendor/markdown-it/markdown-it.js";
import DOMPurify from "../vendor/dompurify/purify.js";
import { enhanceRichText } from "./richtext.js";
import { h } from "./ui.js";

const md = new MarkdownIt({ html: false, linkify: true, breaks: true, typographer: false });

// Math: $…$ and \(…\) inline, $$…$$ and \[…\] displayed. A single $ opens math only before a
// non-space and closes only after one and not before a digit, so "$5 and $10" stays money. The
// formula goes out as text in a span (data-math); richtext.js renders it with KaTeX.
const MATH_DELIMITERS = [["$$", "$$", true], ["\\[", "\\]", true], ["\\(", "\\)", false], ["$", "$", false]];
const MAX_FORMULA = 5000;

function closingDollar(src, from) {
  for (let at = src.indexOf("$", from); at >= 0; at = src.indexOf("$", at + 1)) {
    if (!/\s|\\/.test(src[at - 1]) && !/\d/.test(src[at + 1] || "")) return at;
  }
  return -1;
}

function mathRule(state, silent) {
  const { src, pos } = state;
  const found = MATH_DELIMITERS.find(([open]) => src.startsWith(open, pos));
  if (!found) return false;
  const [open, close, display] = found;
  const from = pos + open.length;
  if (open === "$" && (from >= src.length || /\s/.test(src[from]))) return false;
  const end = open === "$" ? closingDollar(src, from) : src.indexOf(close, from);
  if (end <= from || end - from > MAX_FORMULA) return false;
  if (!silent) {
    const token = state.push("math", "span", 0);
    token.content = src.slice(from, end);
    token.meta = { display };
  }
  state.pos = end + close.length;
  return true;
}

md.inline.ruler.before("escape", "math", mathRule);
md.renderer.rules.math = (tokens, index) => {
  const token = tokens[index];
  return `<span data-math="${token.meta.display ? "display" : "inline"}">${md.utils.escapeHtml(token.content)}</span>`;
};

md.renderer.rules.image = (tokens, index, options, env, self) => {
  const token = tokens[index];
  const src = token.attrGet("src") || "";
  const alt = self.renderInlineAsText(token.children || [], options, env) || "image";
  return `<a href="${md.utils.escapeHtml(src)}" data-image-link="">Image: ${md.utils.escapeHtml(alt)}</a>`;
};

DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A") {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer nofollow");
  }
});

const PURIFY = {
  RETURN_DOM_FRAGMENT: true,
  FORBID_TAGS: ["style", "img", "form", "input", "button", "textarea", "select", "iframe", "svg", "math"],
  FORBID_ATTR: ["style", "class", "id"],
};

function copyButton(getText, label = "Copy") {
  const button = h("button", { type: "button", class: "btn-ghost btn-small copy", text: label });
  button.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(getText());
      button.textContent = "Copied";
    } catch {
      button.textContent = "Copy failed";
    }
    setTimeout(() => { button.textContent = label; }, 1500);
  });
  return button;
}

// Code blocks get a header with their language and a copy button (added as DOM, never as HTML).
function enhanceCodeBlocks(fragment) {
  for (const pre of fragment.querySelectorAll("pre")) {
    const code = pre.querySelector("code");
    const language = [...(code?.classList || [])].find((c) => c.startsWith("language-"))?.slice(9) || "";
    const block = h("div", { class: "code-block" },
      h("div", { class: "code-head" }, h("span", { class: "code-lang", text: language || "code" }),
        copyButton(() => code?.textContent || pre.textContent, "Copy code")));
    pre.replaceWith(block);
    block.append(pre);
  }
  for (const table of fragment.querySelectorAll("table")) {
    const wrap = h("div", { class: "table-wrap" });
    table.replaceWith(wrap);
    wrap.append(table);
  }
}

export function renderMarkdown(text) {
  // DOMPurify keeps the language class of code; classes are otherwise forbidden.
  const html = md.render(text || "").replace(/<code class="language-([\w+#.-]{1,30})">/g, '<code data-lang="$1">');
  const fragment = DOMPurify.sanitize(html, PURIFY);
  for (const code of fragment.querySelectorAll("code[data-lang]")) code.classList.add(`language-${code.dataset.lang}`);
  for (const link of fragment.querySelectorAll("a[data-image-link]")) link.classList.add("image-link");
  enhanceCodeBlocks(fragment);
  enhanceRichText(fragment);
  return fragment;
}

// Fill an element with a message's content in its format: markdown, plain text or JSON.
export function renderContent(el, text, format) {
  if (format === "json") {
    let pretty = text;
    try { pretty = JSON.stringify(JSON.parse(text), null, 2); } catch { /* shown as it came */ }
    el.replaceChildren(h("pre", { class: "plain" }, h("code", { text: pretty })));
  } else if (format === "text") {
    el.replaceChildren(h("div", { class: "plain-text", text }));
  } else {
    el.replaceChildren(renderMarkdown(text));
  }
}

export { copyButton };
