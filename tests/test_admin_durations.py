"""The admin reads like a timeline: durations in words with their units ("350 ms", "1.2 s"),
the run list newest first with when each started and finished, and a session's latest runs
and messages in the order they happened."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from django_q.models import Success

from sessions_app.durations import duration_text
from sessions_app.models import Message, Run, Session

pytestmark = pytest.mark.django_db

T0 = timezone.now().replace(microsecond=0) - timedelta(hours=1)


def cells(html: str, field: str) -> list[str]:
    """The text of each row's `field` column of a change list, top to bottom."""
    found = re.findall(rf'<t[dh] class="field-{field}[^"]*">(.*?)</t[dh]>', html, re.S)
    return [re.sub(r"<[^>]+>", "", cell).strip() for cell in found]


@pytest.fixture
def session() -> Session:
    ada = User.objects.create_user("ada", password="pw")
    session = Session.objects.create(key="web:c1", channel="web", chat_id="c1", owner=ada)
    # Three runs, one a minute: quick, slower, and one still running.
    for minute, (prompt, took) in enumerate([("first", 350), ("second", 1234), ("third", None)]):
        started = T0 + timedelta(minutes=minute)
        run = Run.objects.create(
            session=session,
            channel="web",
            prompt=prompt,
            status=Run.Status.SUCCEEDED if took else Run.Status.RUNNING,
            started=started,
            finished=started + timedelta(milliseconds=took) if took else None,
            trace=[
                {"kind": "model", "name": "m", "started": started.isoformat(), "ms": 350},
                {"kind": "tool", "name": "exec", "started": started.isoformat(), "ms": 1234},
            ],
        )
        Run.objects.filter(pk=run.pk).update(created=started)
        for role in ("user", "assistant"):
            Message.objects.create(session=session, run=run, role=role, content=f"{prompt} {role}")
    return session


def test_the_run_list_is_newest_first_with_its_times_and_durations_in_words(
    admin_client: Client, session: Session
) -> None:
    html = admin_client.get(reverse("admin:sessions_app_run_changelist")).content.decode()
    assert cells(html, "took") == ["-", "1.2 s", "350 ms"]
    assert len(cells(html, "started_at")) == 3 and len(cells(html, "finished_at")) == 3
    assert cells(html, "finished_at")[0] == "-"
    for header in ("Started", "Finished", "Duration"):
        assert re.search(rf">\s*{header}\s*</a>", html), header

    # Sorted by duration, the slowest first.
    ordered = admin_client.get(reverse("admin:sessions_app_run_changelist") + "?o=-9")
    assert cells(ordered.content.decode(), "took")[:2] == ["1.2 s", "350 ms"]


def test_a_runs_page_and_its_timeline_say_durations_in_words(
    admin_client: Client, session: Session
) -> None:
    run = Run.objects.get(prompt="second")
    html = admin_client.get(reverse("admin:sessions_app_run_change", args=[run.pk])).content
    page = html.decode()
    assert re.search(r'<div class="readonly">1\.2 s</div>', page)
    timeline = re.search(r"<div class='run-timeline'>.*?</table></div>", page, re.S)
    assert timeline is not None
    numbers = re.findall(r"<td class='tl-num'>([^<]*)</td>", timeline.group())
    assert numbers[0] == "350 ms" and numbers[3] == "1.2 s"
    assert ": 1.2 s</title>" in timeline.group()


def test_a_sessions_latest_runs_and_messages_read_in_the_order_they_happened(
    admin_client: Client, session: Session
) -> None:
    url = reverse("admin:sessions_app_session_change", args=[session.pk])
    page = admin_client.get(url).content.decode()
    runs = re.search(r"latest runs.*?<ul>(.*?)</ul>", page, re.S | re.I)
    assert runs is not None
    lines = [
        re.sub(r"<[^>]+>", "", line).strip()
        for line in re.findall(r"<li>(.*?)</li>", runs.group(1))
    ]
    assert [line.split(" ", 2)[2] for line in lines] == [
        "succeeded · 350 ms",
        "succeeded · 1.2 s",
        "running",
    ]
    messages = re.search(r"latest messages.*?<ul>(.*?)</ul>", page, re.S | re.I)
    assert messages is not None
    said = re.findall(r"</a> (\w+: \w+ \w+)</li>", messages.group(1))
    assert said[:2] == ["user: first user", "assistant: first assistant"]
    assert said[-1] == "assistant: third assistant"


def test_the_workers_finished_jobs_say_how_long_they_took(admin_client: Client) -> None:
    Success.objects.create(
        id="a" * 32,
        name="consolidate",
        func="agent.job_functions.consolidate",
        started=T0,
        stopped=T0 + timedelta(milliseconds=2500),
        success=True,
    )
    html = admin_client.get(reverse("admin:django_q_success_changelist")).content.decode()
    assert cells(html, "time_taken") == ["2.5 s"]


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (None, None),
        (0, "0 ms"),
        (349.6, "350 ms"),
        (1234, "1.2 s"),
        (42_000, "42 s"),
        (185_000, "3 min 5 s"),
        (7_440_000, "2 h 4 min"),
    ],
)
def test_durations_in_words(ms: float | None, text: str | None) -> None:
    assert duration_text(ms) == text
