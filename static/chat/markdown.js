// Markdown -> sanitised HTML with highlighted code blocks and copy buttons.
// Uses the vendored globals window.marked, window.DOMPurify and window.hljs.

import { el, copyButton } from "./util.js";

const { marked: markedLib, DOMPurify, hljs } = window;

const parser = markedLib ? new markedLib.Marked({ gfm: true, breaks: true }) : null;

if (hljs) hljs.configure({ ignoreUnescapedHTML: true });

if (DOMPurify) {
  // Every link opens in a new tab without handing over window.opener or the referrer.
  DOMPurify.addHook("afterSanitizeAttributes", (node) => {
    if (node.tagName === "A" && node.hasAttribute("href")) {
      node.setAttribute("target", "_blank");
      node.setAttribute("rel", "noopener noreferrer");
    }
  });
}

const PURIFY_OPTIONS = {
  USE_PROFILES: { html: true },
  FORBID_TAGS: ["style", "form", "input", "button", "textarea", "select", "option"],
  FORBID_ATTR: ["style"],
};

/** Sanitised HTML for a markdown string; plain escaped text if a library is missing. */
function toSafeHtml(text) {
  if (!parser || !DOMPurify) return null;
  return DOMPurify.sanitize(parser.parse(text), PURIFY_OPTIONS);
}

/**
 * Render markdown text into target (replacing its content).
 * The HTML is always sanitised by DOMPurify before it reaches the DOM.
 */
export function renderMarkdown(target, text) {
  const html = toSafeHtml(text || "");
  if (html === null) {
    target.textContent = text || "";
    target.classList.add("plain");
    return;
  }
  target.innerHTML = html;
  enhanceCodeBlocks(target);
}

function languageOf(code) {
  const cls = Array.from(code.classList).find((c) => c.startsWith("language-"));
  return cls ? cls.slice("language-".length) : "";
}

/** Highlight every <pre><code> and wrap it with a header holding the language and a Copy button. */
function enhanceCodeBlocks(root) {
  for (const pre of root.querySelectorAll("pre")) {
    const code = pre.querySelector("code") || pre;
    const raw = code.textContent;
    let lang = languageOf(code);
    if (hljs && code !== pre) {
      if (lang && !hljs.getLanguage(lang)) {
        code.classList.remove(`language-${lang}`);
        code.classList.add("nohighlight");
      } else if (lang || raw.length < 20000) {
        try {
          hljs.highlightElement(code);
        } catch {
          /* leave it plain */
        }
      }
    }
    const header = el(
      "div",
      { class: "code-header" },
      el("span", { class: "code-lang", text: lang || "text" }),
      copyButton(() => raw, "Copy", "Copy code"),
    );
    const wrapper = el("div", { class: "code-block" });
    pre.replaceWith(wrapper);
    wrapper.append(header, pre);
  }
}
