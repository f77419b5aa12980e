"""Turning what the web tools download into text for the model: a page's readable
content, pretty JSON, search results.

Imported on the first web tool call (lxml, and trafilatura inside `html_page`), never with
`agent.tools`.
"""

from __future__ import annotations

import codecs
import html as html_entities
import json
import logging
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

import lxml.html
from lxml import etree

logger = logging.getLogger(__name__)

_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_\-:.]+)""", re.I)
# Elements whose text is never the page's content.
_NOT_CONTENT = (
    "script", "style", "noscript", "template", "svg", "math", "iframe", "object", "embed",
    "canvas", "head",
)  # fmt: skip
# Elements that start a line of their own in the plain-text fallback.
_BLOCKS = frozenset(
    {
        "address", "article", "aside", "blockquote", "br", "dd", "div", "dl", "dt",
        "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6",
        "header", "hr", "li", "main", "nav", "ol", "p", "pre", "section", "table", "tr", "ul",
    }
)  # fmt: skip
_TAGS = re.compile(r"<[^>]+>")


@dataclass(frozen=True, slots=True)
class Page:
    title: str
    text: str


def decode(body: bytes, charset: str | None, *, html: bool) -> str:
    """``body`` as text: the declared charset, else a ``<meta charset>``, else UTF-8, else
    Windows-1252 (what browsers assume for undeclared legacy pages)."""
    if body.startswith(codecs.BOM_UTF8):
        return body[len(codecs.BOM_UTF8) :].decode("utf-8", errors="replace")
    declared = [charset] if charset else []
    if html and (found := _META_CHARSET.search(body[:4096])):
        declared.append(found.group(1).decode("ascii"))
    for name in declared:
        try:
            return body.decode(name, errors="replace")
        except LookupError:
            continue
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start >= len(body) - 3:  # a character cut in two by the size cap
            return body.decode("utf-8", errors="replace")
        return body.decode("cp1252", errors="replace")


def html_page(html: str, url: str, *, markdown: bool) -> Page:
    """The title and main content of an HTML page, as markdown or plain text.

    trafilatura finds the main content (no navigation, scripts, styles, footers); a page
    where it finds none (an app shell, a link list) is given as the cleaned text of all of
    its body instead.
    """
    import trafilatura  # costs ~250 ms on first use: only when a page is fetched

    tree = _parse(html)
    title = _title(tree) if tree is not None else ""
    try:
        text = trafilatura.extract(
            html,
            url=url,
            output_format="markdown" if markdown else "txt",
            include_links=markdown,
            include_formatting=markdown,
            include_tables=True,
            include_images=False,
            include_comments=False,
            favor_recall=True,
        )
    except Exception:  # a parser's bug on hostile markup must not cost the page
        logger.warning("trafilatura failed on %s; using the plain text", url, exc_info=True)
        text = None
    if not text or not text.strip():
        text = body_text(tree) if tree is not None else ""
    return Page(title=title, text=text.strip())


def _parse(html: str) -> Any:
    try:
        return lxml.html.document_fromstring(html)
    except ValueError:
        # lxml refuses str input that carries an XML encoding declaration.
        try:
            return lxml.html.document_fromstring(html.encode("utf-8"))
        except (ValueError, etree.ParserError):
            return None
    except etree.ParserError:  # an empty document
        return None


def _title(tree: Any) -> str:
    for found in (
        tree.findtext(".//title"),
        next(iter(tree.xpath("//meta[@property='og:title']/@content")), None),
        next(iter(tree.xpath("//h1")), None),
    ):
        text = found.text_content() if isinstance(found, etree._Element) else found
        if text and text.strip():
            return " ".join(text.split())
    return ""


def body_text(tree: Any) -> str:
    """All of a page's visible text, one block per line; scripts and styles removed."""
    etree.strip_elements(tree, *_NOT_CONTENT, etree.Comment, with_tail=False)
    body = tree.find("body")
    root = body if body is not None else tree
    for element in root.iter():
        if element.tag in _BLOCKS:
            element.tail = "\n" + (element.tail or "")
        elif element.tag in {"td", "th"}:
            element.tail = " " + (element.tail or "")
    lines = (" ".join(line.split()) for line in root.text_content().splitlines())
    return "\n".join(line for line in lines if line)


def pretty_json(text: str) -> str | None:
    """``text`` re-indented when it is JSON, else None."""
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class SearchResult:
    title: str
    url: str
    snippet: str


def brave_results(data: Any) -> list[SearchResult]:
    """The web results of a Brave Search API answer."""
    web = data.get("web") if isinstance(data, dict) else None
    items = web.get("results") if isinstance(web, dict) else None
    results = []
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and item.get("url"):
            results.append(
                SearchResult(
                    title=_plain(str(item.get("title") or item["url"])),
                    url=str(item["url"]),
                    snippet=_plain(str(item.get("description") or "")),
                )
            )
    return results


def _has_class(name: str) -> str:
    return f"contains(concat(' ', normalize-space(@class), ' '), ' {name} ')"


def duckduckgo_results(html: str) -> list[SearchResult]:
    """The organic results of DuckDuckGo's HTML page (ads skipped, its redirect links
    unwrapped to the real address)."""
    tree = _parse(html)
    if tree is None:
        return []
    results = []
    for block in tree.xpath(f"//div[{_has_class('result')}]"):
        if "result--ad" in (block.get("class") or "").split():
            continue
        links = block.xpath(f".//a[{_has_class('result__a')}]")
        if not links:
            continue
        url = _unwrap_duckduckgo(links[0].get("href") or "")
        if not url:
            continue
        snippets = block.xpath(f".//*[{_has_class('result__snippet')}]")
        results.append(
            SearchResult(
                title=" ".join(links[0].text_content().split()) or url,
                url=url,
                snippet=" ".join(snippets[0].text_content().split()) if snippets else "",
            )
        )
    return results


def _unwrap_duckduckgo(href: str) -> str:
    try:
        absolute = urljoin("https://duckduckgo.com/", href)
        parts = urlsplit(absolute)
        host = parts.hostname
    except ValueError:  # "Invalid IPv6 URL" and the like: a result without an address
        logger.info("skipped a DuckDuckGo result whose link does not parse: %r", href[:200])
        return ""
    if host and host.endswith("duckduckgo.com"):
        if parts.path == "/l/":
            return parse_qs(parts.query).get("uddg", [""])[0]
        return ""  # an ad click (/y.js) or one of its own pages
    return absolute


def _plain(text: str) -> str:
    """Search snippets come with <strong> highlights and entities; the model wants text."""
    return " ".join(html_entities.unescape(_TAGS.sub("", text)).split())


def format_results(query: str, results: list[SearchResult]) -> str:
    if not results:
        return f"No results found for {query!r}."
    lines = [f"Results for: {query}", ""]
    for number, result in enumerate(results, 1):
        lines.append(f"{number}. {result.title}")
        lines.append(f"   {result.url}")
        if result.snippet:
            lines.append(f"   {result.snippet}")
    return "\n".join(lines)
