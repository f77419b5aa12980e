"""A run's admin page draws its trace as a timeline: a bar per model call and tool call on
one time axis, the two told apart and failures marked, with links between a run and the
sub-agents it started, and to the cron job a run ran for; nothing inline that the site's
Content-Security-Policy would block."""

from __future__ import annotations

import re

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from agent.turn import SessionRef, run_turn
from cron_app import services as job_services
from sessions_app.models import Run, Session
from tests.llm_server import ScriptedLLM

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent_settings")]


def page(client: Client, run: Run) -> str:
    response = client.get(reverse("admin:sessions_app_run_change", args=[run.pk]))
    assert response.status_code == 200
    return response.content.decode()


def timeline_of(html: str) -> str:
    found = re.search(r"<div class='run-timeline'>.*?</table></div>", html, re.S)
    assert found, "no timeline on the page"
    return found.group()


def bars(timeline: str) -> list[tuple[str, float, float]]:
    """Each row's classes, and its bar's place and width in percent of the axis."""
    rows = re.findall(
        r"<tr class='(tl-row[^']*)'>.*?<rect x='([\d.]+)%' y='1' width='([\d.]+)%'",
        timeline,
        re.S,
    )
    return [(classes, float(x), float(width)) for classes, x, width in rows]


def test_a_run_and_its_subagent_are_drawn_and_linked(
    admin_client: Client, llm: ScriptedLLM
) -> None:
    ada = User.objects.create_user("ada", password="pw")
    llm.tool_call("subagent", {"task": "Read the notes", "label": "reader"})
    llm.tool_call("read_file", {"path": "missing.txt"}, delay=0.05)  # the sub-agent's
    llm.reply("There are no notes.")  # the sub-agent's answer
    llm.reply("No notes yet.")
    async_to_sync(run_turn)(SessionRef("web:a1", ada), "read my notes", channel="web")
    parent = Run.objects.get(channel="web")
    child = Run.objects.get(channel="subagent")

    html = page(admin_client, parent)
    assert "sessions_app/timeline.css" in html
    timeline = timeline_of(html)
    drawn = bars(timeline)
    assert [classes for classes, _, _ in drawn] == [
        "tl-row tl-model",
        "tl-row tl-tool",
        "tl-row tl-model",
    ]
    assert all(0 <= x <= 100 and 0 < width <= 100 - x + 1e-3 for _, x, width in drawn)
    # In order along the axis; the sub-agent's call takes up most of the run.
    assert drawn[0][1] <= drawn[1][1] <= drawn[2][1]
    assert drawn[1][2] > drawn[0][2]
    child_url = reverse("admin:sessions_app_run_change", args=[child.pk])
    assert f"href='{child_url}'>sub-agent run reader</a>" in timeline
    assert html.count(child_url) >= 2  # in the timeline and in the list of sub-agent runs
    assert "<span class='tl-kind'>model</span> openai/scripted" in timeline
    assert "<span class='tl-kind'>tool</span> subagent" in timeline

    html = page(admin_client, child)
    timeline = timeline_of(html)
    assert [classes for classes, _, _ in bars(timeline)] == [
        "tl-row tl-model",
        "tl-row tl-tool tl-failed",
        "tl-row tl-model",
    ]
    assert re.search(r"<span class='tl-error'>failed: [^<]*missing\.txt", timeline)
    assert reverse("admin:sessions_app_run_change", args=[parent.pk]) in html

    for drawn_page in (timeline, timeline_of(page(admin_client, parent))):
        assert "style=" not in drawn_page and "<style" not in drawn_page
        assert "<script" not in drawn_page


def test_a_cron_run_links_to_its_job_and_an_untraced_run_says_so(admin_client: Client) -> None:
    ada = User.objects.create_user("ada", password="pw")
    job = job_services.create_job(
        owner=ada, message="Tidy up", session="web:a1", kind="every", every_seconds=60
    )
    session = Session.objects.create(key=f"cron:{job.pk}", channel="cron", chat_id="1", owner=ada)
    run = Run.objects.create(session=session, channel="cron", prompt="Tidy up", cron_job=job)

    html = page(admin_client, run)
    assert reverse("admin:cron_app_cronjob_change", args=[job.pk]) in html
    assert "No model or tool calls recorded" in html


def test_the_timelines_stylesheet_is_served(admin_client: Client) -> None:
    response = admin_client.get("/static/sessions_app/timeline.css")
    assert response.status_code == 200
    assert b".tl-failed rect" in b"".join(response.streaming_content)  # type: ignore[attr-defined]


def test_a_quick_turn_writes_its_trace_once_with_its_ending(llm: ScriptedLLM) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    for name in ("a.txt", "b.txt", "c.txt"):
        llm.tool_call("read_file", {"path": name})
    llm.reply("Read them all.")
    with CaptureQueriesContext(connection) as queries:
        async_to_sync(run_turn)(SessionRef("web:quick", None), "read three files", channel="web")
    run = Run.objects.get(session__key="web:quick")
    assert [step["name"] for step in run.trace][1::2] == ["read_file"] * 3
    writes = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("UPDATE")]
    assert sum('"trace"' in sql for sql in writes) == 1, writes
