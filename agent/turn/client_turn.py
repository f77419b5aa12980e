"""What a turn does for a client that brings tools of its own (an OpenAI client's
functions): they are offered to the model beside the turn's, a call of one ends the turn
handed over to the client (`agent.gate.Gate.external`), and the client's results continue
it, from the turn's own record where that matches what the client sent.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from agent.budget import LLMMessage
from agent.conf import AgentSettings
from agent.gate import Gate, unanswered
from agent.loop_tools import Tools
from agent.turn import attachments, store
from agent.turn.options import TurnOptions
from agent.turn.refusals import InvalidInput
from sessions_app.models import Run, Session

# What a call of the client's tools gets when the client sent no result for it.
NO_RESULT = "Error: the client sent no result for this call."


class ClientToolset:
    """The turn's tools with the client's definitions beside them. The client's are never
    run here: the gate hands their calls over."""

    def __init__(self, tools: Tools, definitions: tuple[dict[str, Any], ...]) -> None:
        self.tools = tools
        self.client = list(definitions)

    def definitions(self) -> list[dict[str, Any]]:
        return [*self.tools.definitions(), *self.client]

    def parallel_safe(self, name: str) -> bool:
        return self.tools.parallel_safe(name)

    async def execute(self, name: str, arguments: dict[str, Any] | str | None) -> str:
        return await self.tools.execute(name, arguments)


def refuse_clashes(options: TurnOptions, turn_tools: list[str]) -> None:
    """A client tool named as one of the turn's own is refused, naming it: the model could
    not tell them apart."""
    taken = set(turn_tools)
    for index, tool in enumerate(options.client_tools):
        name = tool["function"]["name"]
        if name in taken:
            raise InvalidInput(
                f"the tool {name!r} has the name of one of the agent's own tools; rename "
                "it, or use the model agentsite-plain, which offers the client's tools alone",
                field=f"tools[{index}]",
            )


def with_client_tools(tools: Tools, options: TurnOptions) -> Tools:
    return ClientToolset(tools, options.client_tools) if options.client_tools else tools


def gate_with_client(gate: Gate | None, options: TurnOptions) -> Gate | None:
    """`gate` with the client's tools handed over; a turn with no gate of its own (a direct
    generation) gets one that only does that."""
    names = options.client_tool_names()
    if not names:
        return gate
    if gate is None:
        return Gate(needed=lambda name: False, external=names)
    return dataclasses.replace(gate, external=names)


async def continued(
    session: Session,
    run: Run,
    options: TurnOptions,
    history: list[LLMMessage],
    *,
    window: int,
) -> tuple[list[LLMMessage], list[LLMMessage], dict[str, str | None]]:
    """What the turn goes on from: the history before its user message, what it said after
    that message, and the client's results as the loop's verdicts.

    The session's own record of the turn stands in for what the client sent when its last
    answer's calls are the ones the client answered: it also holds the agent's own calls,
    which the client never saw. A turn on the stored history (a client that sends only its
    results, as the Responses API's `previous_response_id` does) finds its user message
    there, and what came before it is the history. A turn that continues nothing goes on
    from `history` alone."""
    if options.continuation is None:
        return history, [], {}
    results: dict[str, str | None] = dict(options.continuation.results)
    turn = list(options.continuation.turn)
    stored_history = options.history is None
    if stored_history:
        stored = history
    else:
        stored = await store.recent_messages(session=session, limit=window, before_run=run.pk)
    starts = [index for index, message in enumerate(stored) if message.get("role") == "user"]
    if starts:
        tail = stored[starts[-1] + 1 :]
        if results and set(results) <= {call["id"] for call in unanswered(tail)}:
            turn = tail
        if stored_history:
            history = stored[: starts[-1]]
    # A call of the client's tools it did not answer still needs an answer for the
    # provider; the agent's own calls after it run now.
    client = options.client_tool_names()
    for call in unanswered(turn):
        if call["id"] not in results and call["function"]["name"] in client:
            results[call["id"]] = NO_RESULT
    return history, turn, results


async def prepare_files(
    options: TurnOptions, *, owner: str, conf: AgentSettings, accepts: attachments.Accepts
) -> TurnOptions:
    """`options` with the files of its new message kept (refused, naming the part, when
    unreadable or when the model cannot take them) and those of its history kept and
    shown to the model as it can take them."""
    for kept in options.files:  # kept for another model, which could take them
        if not accepts(kept.kind):
            raise InvalidInput(f"this model cannot take {attachments.PLURALS[kept.kind]}")
    files = list(options.files)
    for where, part in options.attachments:
        kind = attachments.kind_of(part) or "file"
        if not accepts(kind):
            raise InvalidInput(
                f"this model cannot take {attachments.PLURALS[kind]}: send the message without "
                f"{'it' if len(options.attachments) == 1 else 'them'}, or pick a model "
                "that can",
                field=where,
            )
        files.append(await attachments.keep(part, owner=owner, conf=conf, where=where))
    history = options.history
    if history is not None and any(attachments.file_parts(message) for message in history):
        history = tuple([await _shown(message, owner, conf, accepts) for message in history])
    return dataclasses.replace(options, files=tuple(files), attachments=(), history=history)


async def _shown(
    message: LLMMessage, owner: str, conf: AgentSettings, accepts: attachments.Accepts
) -> LLMMessage:
    """A message of the history with its files as the model can take them: inline, or a
    line that names the kept file, or says why it could not be read."""
    if not attachments.file_parts(message):
        return message
    parts: list[dict[str, Any]] = []
    for part in message["content"]:
        kind = attachments.kind_of(part)
        if kind is None:
            parts.append(part)
            continue
        url = attachments.web_address(part)
        if url is not None and not accepts(kind):
            # Kept when it was the new message; not fetched again only to be named.
            parts.append({"type": "text", "text": f"[{kind} attached: {url[:200]}]"})
            continue
        try:
            kept = await attachments.keep(part, owner=owner, conf=conf)
        except InvalidInput as exc:
            parts.append({"type": "text", "text": f"[a {kind} that could not be read: {exc}]"})
            continue
        parts.append(kept.for_model() if accepts(kind) else {"type": "text", "text": kept.note()})
    return {**message, "content": parts}
