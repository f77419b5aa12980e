"""A run's trace drawn as a timeline for its admin page: one row per model call or tool call,
a bar on a shared time axis from the run's start to its end.

The site's Content-Security-Policy allows no inline style, so nothing here has a `style`
attribute: each bar is an SVG rectangle placed by its `x` and `width` attributes (in percent
of the track), and `sessions_app/timeline.css` gives the colours, which tell model calls,
tool calls and failures apart, each also named in words.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from sessions_app.durations import duration_text
from sessions_app.models import Run

# A bar narrower than this (percent of the axis) would not show.
MIN_WIDTH = 0.4


def timeline(run: Run, children: Iterable[Run] = ()) -> SafeString:
    """The HTML of `run`'s timeline; a tool call during which one of `children` (the
    sub-agents it started) was made links to that run's page."""
    steps = [_parsed(step) for step in run.trace or []]
    if not steps:
        return format_html(
            "<p class='tl-empty'>{}</p>",
            "No model or tool calls recorded (the run made none, or AGENT_TRACE was off).",
        )
    origin = min([start for start, _ in steps] + ([run.started] if run.started else []))
    ends = [start + timedelta(milliseconds=step["ms"]) for start, step in steps]
    end = max(ends + ([run.finished] if run.finished else []))
    span = max((end - origin).total_seconds() * 1000, 1.0)
    started_children = [(child.created, child) for child in children]
    rows = format_html_join(
        "",
        "{}",
        (
            (_row(step, (start - origin).total_seconds() * 1000, span, started_children),)
            for start, step in steps
        ),
    )
    return format_html(
        "<div class='run-timeline'>"
        "<p class='tl-legend'><span class='tl-key tl-model'>model call</span> "
        "<span class='tl-key tl-tool'>tool call</span> "
        "<span class='tl-key tl-failed'>failed</span></p>"
        "<table class='tl'><thead><tr><th>call</th><th>took</th><th>tokens</th><th>cost</th>"
        "<th class='tl-track'>{}</th></tr></thead><tbody>{}</tbody></table></div>",
        _axis(span),
        rows,
    )


def _parsed(step: dict[str, Any]) -> tuple[datetime, dict[str, Any]]:
    return datetime.fromisoformat(step["started"]), step


def _axis(span: float) -> SafeString:
    marks = ((0, "start"), (50, "middle"), (100, "end"))
    labels = format_html_join(
        "",
        "<text x='{}%' y='12' text-anchor='{}'>{}</text>",
        ((at, anchor, duration_text(span * at / 100)) for at, anchor in marks),
    )
    return format_html("<svg class='tl-axis' width='100%' height='16'>{}</svg>", labels)


def _row(
    step: dict[str, Any], offset: float, span: float, children: list[tuple[datetime, Run]]
) -> SafeString:
    kind = "model" if step.get("kind") == "model" else "tool"
    failed = bool(step.get("error"))
    x = min(offset / span * 100, 100 - MIN_WIDTH)
    width = max(step["ms"] / span * 100, MIN_WIDTH)
    tokens = (step.get("tokens") or {}).get("total_tokens") if kind == "model" else None
    cost = step.get("cost") if kind == "model" else None
    classes = f"tl-row tl-{kind}" + (" tl-failed" if failed else "")
    title = f"{kind} call {step['name']}: {duration_text(step['ms'])}" + (
        f", failed: {step['error']}" if failed else ""
    )
    return format_html(
        "<tr class='{}'><td class='tl-call'><span class='tl-kind'>{}</span> {}{}{}</td>"
        "<td class='tl-num'>{}</td><td class='tl-num'>{}</td><td class='tl-num'>{}</td>"
        "<td class='tl-track'><svg class='tl-bar' width='100%' height='14' role='img'>"
        "<title>{}</title><rect x='{}%' y='1' width='{}%' height='12' rx='2'/>"
        "</svg></td></tr>",
        classes,
        kind,
        step["name"],
        _child_link(step, children),
        format_html(" <span class='tl-error'>failed: {}</span>", step["error"]) if failed else "",
        duration_text(step["ms"]),
        "" if tokens is None else tokens,
        "" if cost is None else f"${cost:.6f}",
        title,
        f"{x:.3f}",
        f"{min(width, 100 - x):.3f}",
    )


def _child_link(step: dict[str, Any], children: list[tuple[datetime, Run]]) -> SafeString:
    if step.get("kind") != "tool" or not children:
        return SafeString("")
    start = datetime.fromisoformat(step["started"])
    end = start + timedelta(milliseconds=step["ms"] + 1)
    made = [child for created, child in children if start <= created <= end]
    return format_html_join(
        "",
        " <a class='tl-child' href='{}'>sub-agent run {}</a>",
        (
            (reverse("admin:sessions_app_run_change", args=[child.pk]), child.label or child.pk)
            for child in made
        ),
    )
