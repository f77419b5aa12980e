"""Consolidation: the oldest part of a long session summarised into memory.

When a session's unconsolidated messages pass `AGENT_MEMORY_WINDOW`, or its history passes
three quarters of what a model call may send, a background job asks the model, through a
forced `save_memory` tool call, for a history entry (what happened, for this session) and
an updated long-term memory (what matters, for every session of the owner). `/new` archives
the whole unconsolidated part the same way. A provider that refuses a forced tool gets the
tool offered instead; when the model fails or answers without the tool, the part is kept
as a plain transcript rather than lost.

Its model calls are its owner's, as a turn's are: each is reserved against their daily
budget and settled after (`spending`), and what they used goes into the ledger by model
when it is done. With the budget spent it calls no model, and the part is kept as a
transcript all the same.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from asgiref.sync import sync_to_async

from agent import jobs
from agent.conf import AgentSettings
from agent.llm import LLM, LLMError, LLMResponse
from agent.loop import LoopResult
from agent.tokens import TokenCounter
from agent.turn import store
from agent.turn.db import on_db
from agent.turn.model_config import llm_config
from agent.turn.spending import TurnSpending, spending_of
from sessions_app import memory as memories
from sessions_app import selectors
from sessions_app import usage as ledger
from sessions_app.models import Message, Session

logger = logging.getLogger(__name__)

TRANSCRIPT_RESULT_CHARS = 500
# A line of the transcript, and the parts a run takes, stay small enough for any window.
TRANSCRIPT_LINE_CHARS = 4_000
MAX_PART_MESSAGES = 200
INSTRUCTIONS = """\
You keep an assistant's memory. Read the conversation below and call save_memory once:
- history_entry: a few sentences on what happened and what was decided, with dates, so
  that the assistant can pick the thread up later; it replaces the summary so far, so keep
  what of that still matters;
- memory_update: the whole long-term memory, rewritten: the current one with what is worth
  remembering across conversations added (facts about the user, preferences, ongoing
  projects), and whatever the conversation made obsolete removed. Keep it short."""
SAVE_MEMORY = {
    "type": "function",
    "function": {
        "name": "save_memory",
        "description": "Save the summary of the conversation and the updated long-term memory.",
        "parameters": {
            "type": "object",
            "properties": {
                "history_entry": {"type": "string"},
                "memory_update": {"type": "string"},
            },
            "required": ["history_entry", "memory_update"],
        },
    },
}
FORCED = {"type": "function", "function": {"name": "save_memory"}}


@dataclass(frozen=True, slots=True)
class Saved:
    history_entry: str
    memory_update: str | None


async def consolidate_session(
    session_id: int,
    *,
    model: str,
    conf: AgentSettings,
    everything: bool = False,
    wait: float = 0.0,
) -> bool:
    """Summarise the oldest unconsolidated part of the session (all of it with
    `everything`) into memory. False when there was nothing to do, or when another
    consolidation of the session held it for longer than `wait` seconds."""
    deadline = time.monotonic() + wait
    while (lease := await on_db(memories.claim_consolidation)(session_id=session_id)) is None:
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.5)
    try:
        rows = await on_db(_part)(session_id, None if everything else conf.memory_window)
        if not rows:
            return False
        transcript = _transcript(rows)
        if model:
            saved = await _summarise(transcript, rows[0], model=model, conf=conf)
        else:  # no model to ask: kept as it was said
            saved = Saved(f"Archived conversation:\n\n{transcript}", memory_update=None)
        await on_db(memories.save_consolidation)(
            session_id=session_id,
            upto=rows[-1].id,
            history_entry=saved.history_entry,
            memory_update=saved.memory_update,
        )
        return True
    finally:
        await on_db(memories.release_consolidation)(session_id=session_id, lease=lease)


def _part(session_id: int, window: int | None) -> list[Message]:
    """The oldest messages to consolidate: all of them without a `window`; else all but
    the newest half (at most half the window, at least one message), ending just before a
    user message, so that what stays begins a turn. A few large messages that fill the
    context thus still give up their older half."""
    rows = list(memories.unconsolidated(session_id=session_id).select_related("session"))
    rows = rows[:MAX_PART_MESSAGES]
    if window is None:
        return rows
    keep = max(1, min(window // 2, len(rows) // 2))
    end = max(0, len(rows) - keep)
    while 0 < end < len(rows) and rows[end].role != Message.Role.USER:
        end -= 1
    return rows[:end]


def _transcript(rows: list[Message]) -> str:
    lines = []
    for row in rows:
        text = row.content or ""
        if row.role == Message.Role.TOOL:
            text = text[:TRANSCRIPT_RESULT_CHARS] + (
                "…" if len(text) > TRANSCRIPT_RESULT_CHARS else ""
            )
            lines.append(f"[{row.created:%Y-%m-%d %H:%M}] TOOL {row.name}: {text}")
        elif row.tool_calls:
            calls = ", ".join(c.get("function", {}).get("name", "?") for c in row.tool_calls)
            lines.append(f"[{row.created:%Y-%m-%d %H:%M}] ASSISTANT (calls {calls}) {text}")
        else:
            if len(text) > TRANSCRIPT_LINE_CHARS:
                text = text[:TRANSCRIPT_LINE_CHARS] + "…"
            lines.append(f"[{row.created:%Y-%m-%d %H:%M}] {row.role.upper()}: {text}")
    return "\n".join(lines)


async def _summarise(transcript: str, first: Message, *, model: str, conf: AgentSettings) -> Saved:
    session = first.session
    # A team chat's summary is paid for by the member whose turn came last.
    owner_id = session.owner_id or await on_db(selectors.last_author)(session_id=session.pk)
    current = await on_db(memories.long_term_memory)(
        owner_id=session.owner_id, team_id=session.team_id
    )
    earlier = await on_db(memories.latest_summary)(session_id=first.session_id)
    messages = [
        {"role": "system", "content": INSTRUCTIONS},
        {
            "role": "user",
            "content": f"## Current long-term memory\n\n{current or '(empty)'}\n\n"
            f"## Summary of this conversation so far\n\n{earlier or '(none)'}\n\n"
            f"## Conversation since\n\n{transcript}",
        },
    ]
    llm = LLM(llm_config(conf, model))
    spending = await spending_of(llm, owner_id)
    used = _Used()
    try:
        saved = await _ask(llm, messages, spending, used)
    finally:
        # What it used is counted however it ended, and what it held goes with that.
        if used.usage or spending is not None:
            await on_db(ledger.record_usage)(
                owner_id=owner_id,
                model=model,
                usage=used.usage,
                cost=used.cost,
                hold_id=spending.hold_id if spending is not None else None,
            )
    # Nothing usable came back: the part is kept as it was said, and memory stays as it is.
    return saved or Saved(f"Archived conversation:\n\n{transcript}", memory_update=None)


@dataclass
class _Used:
    """What a consolidation's model calls used and cost (None: no price known)."""

    usage: dict[str, int] = field(default_factory=dict)
    cost: Decimal | None = None

    def add(self, response: LLMResponse) -> None:
        for key, value in response.usage.items():
            self.usage[key] = self.usage.get(key, 0) + value
        if response.cost is not None:
            self.cost = (self.cost or Decimal(0)) + Decimal(str(round(response.cost, 6)))


async def _ask(
    llm: LLM, messages: list[dict[str, Any]], spending: TurnSpending | None, used: _Used
) -> Saved | None:
    """The model's `save_memory`, asked up to three times; None when none came, or when the
    owner's budget has no room for a call."""
    sent = TokenCounter(llm.config.model)
    tokens = sent.messages(messages) + sent.payload([SAVE_MEMORY])
    choice: str | dict[str, Any] = FORCED
    for attempt in range(3):
        if spending is not None:
            refused = await spending.reserve(tokens, LoopResult("", "succeeded", attempt))
            if refused is not None:
                logger.info("consolidation without a summary: the owner's budget is spent")
                return None
        try:
            response = await llm.stream(messages, [SAVE_MEMORY], tool_choice=choice)
        except LLMError as error:
            if spending is not None:
                await spending.settle(None)
            if error.kind == "bad_request" and choice == FORCED:
                logger.info("the model refused a forced tool call; offering it instead")
                choice = "auto"
                continue
            logger.warning("consolidation failed (attempt %d): %s", attempt + 1, error)
            continue
        used.add(response)
        if spending is not None:
            await spending.settle(response.cost)
        saved = _read(response.tool_calls)
        if saved is not None:
            return saved
        logger.warning("consolidation answered without save_memory (attempt %d)", attempt + 1)
    return None


def _read(calls: list[Any]) -> Saved | None:
    for call in calls:
        if call.name != "save_memory":
            continue
        try:
            arguments = json.loads(call.arguments or "{}")
        except json.JSONDecodeError:
            return None
        if not isinstance(arguments, dict):
            return None
        entry = arguments.get("history_entry")
        update = arguments.get("memory_update")
        if isinstance(entry, str) and entry.strip():
            return Saved(entry.strip(), update.strip() if isinstance(update, str) else None)
    return None


def due(*, crowded: bool, history_tokens: int, limit: int) -> bool:
    """Whether a session should be consolidated now: it holds more unconsolidated messages
    than the memory window (`crowded`), or its history cost `history_tokens` of `limit`."""
    return crowded or history_tokens > limit * 3 // 4


def queue(session_id: int, model: str) -> None:
    """Consolidate the session in the worker, once the turn's writes are committed."""
    jobs.enqueue(jobs.CONSOLIDATE_MEMORY, session_id, model, task_name=f"memory-{session_id}")


async def queue_if_due(
    session: Session, model: str, *, window: int, history: tuple[int, int]
) -> None:
    """Queue the session's consolidation if it has grown enough (`due`): `window` is the
    memory window, `history` what the history cost of what a turn's model call may send."""
    try:
        tokens, limit = history
        crowded = await store.more_unconsolidated_than(session_id=session.pk, count=window)
        if due(crowded=crowded, history_tokens=tokens, limit=limit):
            await sync_to_async(queue)(session.pk, model)
    except Exception:  # the reply is out; memory can wait for the next turn
        logger.exception("could not queue the consolidation of %s", session.key)
