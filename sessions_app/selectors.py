"""Reads of sessions and their messages."""

from __future__ import annotations

from collections.abc import Collection
from datetime import timedelta
from typing import Any, NamedTuple
from uuid import UUID

from django.contrib.auth.models import Group
from django.db.models import F, Max, Q, QuerySet
from django.utils import timezone

from sessions_app import usage, versions
from sessions_app.keys import USER_CHANNELS, is_team_key, is_user_key
from sessions_app.models import STALE_AFTER_SECONDS, Message, Relayed, Run, Session
from sessions_app.people import named


def recent_messages(
    *, session: Session, limit: int, before_run: UUID | None = None
) -> list[dict[str, Any]]:
    """The session's last `limit` live messages not yet summarised into memory, oldest
    first, in the model's format, leaving out those of `before_run` (the turn that is about
    to use them)."""
    if limit <= 0:
        return []
    messages = Message.objects.filter(
        session=session, archived=False, id__gt=F("session__last_consolidated")
    )
    if before_run is not None:
        messages = messages.exclude(run_id=before_run)
    rows = list(messages.order_by("-id")[:limit])
    return [row.as_llm_message() for row in reversed(rows)]


def find_session(*, key: str, owner: Any) -> Session | None:
    """`owner`'s session `key`, or a team chat of one of their teams; None for a key that
    only other users (or nobody) have.

    Every door that takes a key from a person asks here, so a team chat opens to the
    team's members alone, and to a member no longer in the team no more."""
    if owner is None or not owner.is_authenticated:
        return None
    if is_team_key(key):
        return team_sessions(member=owner).filter(key=key).first()
    return Session.objects.filter(key=key, owner=owner).first()


def team_sessions(*, member: Any) -> QuerySet[Session]:
    """The team chats of the teams `member` belongs to."""
    return Session.objects.filter(
        owner__isnull=True, team__isnull=False, team__user=member
    ).select_related("team")


def is_member(*, user_id: int | None, team_id: int) -> bool:
    """Whether user `user_id` is an active member of team (group) `team_id`."""
    if user_id is None:
        return False
    return Group.objects.filter(pk=team_id, user__pk=user_id, user__is_active=True).exists()


def list_sessions(*, owner: Any) -> list[Session]:
    """`owner`'s sessions a person can open, the most recently active first (none for an
    anonymous user).

    Only keys that pass the key rule: the command line's, scheduled jobs', the heartbeat's
    and sub-agents' sessions are the agent's to open, and no door takes their keys.
    """
    if owner is None or not owner.is_authenticated:
        return []
    prefixes = Q()
    for channel in USER_CHANNELS:
        prefixes |= Q(key__startswith=f"{channel}:")
    team_chats = Q(owner__isnull=True, team__isnull=False, team__user=owner)
    sessions = (
        Session.objects.filter(prefixes)
        .filter(Q(owner=owner) | team_chats)
        .select_related("team")
        .order_by("-updated", "-id")
    )
    # The rule itself is checked here rather than in SQL, which would need a copy of it.
    return [session for session in sessions if is_user_key(session.key)]


def session_messages(*, session: Session, archived: bool | None = None) -> QuerySet[Message]:
    """Every message of the session in the order it was written; `archived` True or
    False keeps only the messages that `/new` archived, or only the live ones."""
    messages = Message.objects.filter(session=session).select_related("run__author")
    if archived is not None:
        messages = messages.filter(archived=archived)
    return messages.order_by("id")


def last_author(*, session_id: int) -> int | None:
    """Whose turn the session's latest run was."""
    runs = Run.objects.filter(session_id=session_id, author__isnull=False).order_by("-created")
    return runs.values_list("author_id", flat=True).first()


def find_run(*, run_id: UUID, owner: Any) -> Run | None:
    """`owner`'s run `run_id`, or one of a team chat of theirs; None for another user's, an
    ownerless session's, or none."""
    if owner is None or not owner.is_authenticated:
        return None
    theirs = Q(session__owner=owner) | Q(
        session__owner__isnull=True, session__team__isnull=False, session__team__user=owner
    )
    return Run.objects.select_related("session").filter(theirs, pk=run_id).first()


def get_session(*, session_id: int) -> Session | None:
    return Session.objects.select_related("owner").filter(pk=session_id).first()


def runs_to_stop(*, run_ids: Collection[UUID]) -> set[UUID]:
    """Those of the runs that should stop: asked to, deleted (with their session), or of a
    user no longer active, however the account was changed (an `update()` or SQL sends no
    signal)."""
    going_on = (
        Run.objects.filter(pk__in=run_ids, cancel_requested=False)
        .exclude(session__owner__is_active=False)
        .exclude(author__is_active=False)
    )
    return set(run_ids) - set(going_on.values_list("pk", flat=True))


def has_running_turn(*, session_id: int) -> bool:
    alive = timezone.now() - timedelta(seconds=STALE_AFTER_SECONDS)
    return Run.objects.filter(
        session_id=session_id, status=Run.Status.RUNNING, last_alive__gte=alive
    ).exists()


def current_turn_open(*, session_id: int) -> bool:
    """Whether the session's current turn (`Session.turn`) is still running, by the account
    of a process that lives (it was marked alive lately)."""
    alive = timezone.now() - timedelta(seconds=STALE_AFTER_SECONDS)
    return Run.objects.filter(
        session_id=session_id,
        session__turn=F("pk"),
        status=Run.Status.RUNNING,
        last_alive__gte=alive,
    ).exists()


def unfinished_run(*, session_id: int) -> Run | None:
    """The session's latest run still marked running, whether or not its process lives."""
    return (
        Run.objects.filter(session_id=session_id, status=Run.Status.RUNNING)
        .order_by("-created")
        .first()
    )


def get_run(*, run_id: UUID) -> Run | None:
    """The run with its session and the session's owner."""
    return (
        Run.objects.select_related("session", "session__owner", "author").filter(pk=run_id).first()
    )


def messages_for_display(*, session: Session, limit: int = 200) -> list[dict[str, Any]]:
    """The live conversation as a client shows it, oldest first."""
    return display_page(session_id=session.pk, limit=limit).messages


class DisplayPage(NamedTuple):
    """Messages of the live conversation, oldest first, and whether older ones exist."""

    messages: list[dict[str, Any]]
    has_more: bool


# A page that reaches back to a given message takes this many before it too, so that the
# message is read in its context; and no page holds more than `MAX_PAGE` messages.
CONTEXT_BEFORE = 10
MAX_PAGE = 1_000


# What `_shown` reads of a message's run.
SHOWN_FROM_RUN = {
    "run_channel": F("run__channel"),
    "run_model": F("run__model"),
    "author_id": F("run__author_id"),
    "author_first": F("run__author__first_name"),
    "author_last": F("run__author__last_name"),
    "author_username": F("run__author__username"),
}


def display_page(
    *, session_id: int, limit: int, before: int | None = None, back_to: int | None = None
) -> DisplayPage:
    """The latest `limit` live messages of the session (those before message `before`,
    with it), as a client shows them; with `back_to`, as many more as reach back to that
    message and `CONTEXT_BEFORE` before it, up to `MAX_PAGE`."""
    live = Message.objects.filter(session_id=session_id, archived=False)
    older = live if before is None else live.filter(id__lt=before)
    if back_to is not None:
        reach = older.filter(id__gte=back_to).count() + CONTEXT_BEFORE
        limit = min(max(limit, reach), MAX_PAGE)
    rows = list(
        older.annotate(
            **SHOWN_FROM_RUN,
            run_usage=F("run__usage"),
            run_cost=F("run__cost"),
            run_finished=F("run__finished"),
        ).order_by("-id")[:limit]
    )
    has_more = bool(rows) and live.filter(id__lt=rows[-1].id).exists()
    shown = [_shown(row) for row in reversed(rows)]
    # A finished run's usage goes with its last reply, as the chat showed it when it ended:
    # not with a reply of this page when the run goes on past it.
    ended: set[Any] = set()
    if before is not None:
        runs = {row.run_id for row in rows if row.run_id}
        ended = set(live.filter(id__gte=before, run_id__in=runs).values_list("run_id", flat=True))
    for message, row in zip(reversed(shown), rows, strict=True):
        if row.role == "assistant" and row.run_finished and row.run_id not in ended:
            ended.add(row.run_id)
            run = Run(usage=row.run_usage, cost=row.run_cost)
            message["run_usage"] = usage.run_usage(run)
    _add_tool_durations(shown)
    versions.add_versions(session_id, shown)
    return DisplayPage(shown, has_more)


def version_page(*, session_id: int, message_id: int) -> list[dict[str, Any]] | None:
    """The earlier version of the conversation that starts at message `message_id` (one an
    edit or a regeneration replaced), as a client shows messages; None if there is none."""
    rows = versions.version_rows(
        session_id=session_id, message_id=message_id, annotations=SHOWN_FROM_RUN
    )
    if rows is None:
        return None
    shown = [_shown(row) for row in rows]
    _add_tool_durations(shown)
    return shown


def _shown(row: Any) -> dict[str, Any]:
    # Who wrote a person's message, and whose message a reply answers (a team chat's
    # members see both).
    author = named(row.author_id, row.author_first, row.author_last, row.author_username)
    shown = {
        "id": row.id,
        # What a sub-agent's report said to the agent is the model's input, not the user's
        # words: clients show it as a note (see `agent.turn.subagents`).
        "role": "system" if row.role == "user" and row.run_channel == "system" else row.role,
        "content": row.content,
        "tool_calls": row.tool_calls,
        "tool_call_id": row.tool_call_id or None,
        "name": row.name or None,
        "stopped": row.stopped,
        "reasoning_content": row.reasoning_content or None,
        "run_id": str(row.run_id) if row.run_id else None,
        "created": row.created.isoformat(),
        # The model that wrote it, as its run records (clients show it with the reply).
        "model": (row.run_model or None) if row.role == "assistant" else None,
    }
    if author is not None and row.role == "user" and row.run_channel != "system":
        shown["author"] = author
    elif author is not None and row.role == "assistant":
        shown["answering"] = author
    return shown


def rerun_start(
    *, session: Session, message_id: int | None = None, run_id: UUID | None = None
) -> Message | None:
    """The live message a conversation would run again from: message `message_id`, or the
    first message of run `run_id`, or (neither) the user's latest message. None if there
    is no such message in the session's live conversation. Its run comes with it."""
    messages = Message.objects.filter(session=session, archived=False).select_related("run")
    if message_id is not None:
        return messages.filter(pk=message_id).first()
    if run_id is not None:
        return messages.filter(run_id=run_id).order_by("id").first()
    # The user's words: not a sub-agent's report to the agent, stored as a user message.
    theirs = messages.filter(role=Message.Role.USER).exclude(run__channel="system")
    return theirs.order_by("-id").first()


def _add_tool_durations(shown: list[dict[str, Any]]) -> None:
    """Each tool result's `duration_ms`, as its `tool_result` frame carried it live: from its
    run's trace, which times every tool call by its id (not when the trace was off)."""
    tool_runs = {m["run_id"] for m in shown if m["role"] == "tool" and m["run_id"]}
    if not tool_runs:
        return
    took: dict[tuple[str, str], int] = {}
    for run_id, trace in Run.objects.filter(pk__in=tool_runs).values_list("pk", "trace"):
        for step in trace or []:
            if step.get("kind") == "tool" and step.get("call_id") and step.get("ms") is not None:
                took[(str(run_id), str(step["call_id"]))] = int(step["ms"])
    for message in shown:
        if message["role"] == "tool" and message["tool_call_id"]:
            ms = took.get((message["run_id"], message["tool_call_id"]))
            if ms is not None:
                message["duration_ms"] = ms


def subagent_run(*, run_id: UUID) -> Run | None:
    """A sub-agent's run with the session that spawned it and that session's owner."""
    return (
        Run.objects.select_related("session", "session__owner", "parent", "parent__owner")
        .filter(pk=run_id, parent__isnull=False)
        .first()
    )


def subagents_among(*, run_ids: Collection[UUID]) -> list[UUID]:
    return list(
        Run.objects.filter(pk__in=run_ids, parent__isnull=False).values_list("pk", flat=True)
    )


def latest_session(*, owner: Any, channel: str) -> Session | None:
    """The owner's session of `channel` that had the latest turn."""
    sessions = Session.objects.filter(owner=owner) if owner is not None else Session.objects
    if owner is None:
        sessions = sessions.filter(owner__isnull=True)
    return (
        sessions.filter(channel=channel)
        .annotate(last_turn=Max("runs__created"))
        .order_by(F("last_turn").desc(nulls_last=True), "-updated")
        .first()
    )


def relayed_after(*, after_id: int, limit: int = 500) -> list[tuple[int, int, str, Any]]:
    """`(id, session id, origin, message)` of the relayed messages past `after_id`, oldest
    first."""
    rows = Relayed.objects.filter(pk__gt=after_id).order_by("pk")[:limit]
    return list(rows.values_list("pk", "session_id", "origin", "message"))


def last_relayed_id() -> int:
    last = Relayed.objects.order_by("-pk").values_list("pk", flat=True).first()
    return last or 0
