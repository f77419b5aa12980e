"""The turn package: everything that happens between a message arriving at a door and its
answer going back, and the one interface the doors use. Its modules are its own: a door, a
job or anything else outside imports the names below from `agent.turn`, never a module of
it (an import-linter contract holds this).

What a door may ask for, and what it gets back:

- Run a turn: `run_turn(session, content, channel=, emit=, model=, options=)` with a session
  key or a `SessionRef` (key, owner, the row a socket pinned). Events go to `emit` as they
  happen (`agent.events`); the call returns a `TurnResult` (text, status, run id, usage,
  whether the model already delivered its answer). `is_command(content)`: whether it is a
  slash command, which answers with text and costs no model call.
- Run a conversation again from one of the user's messages: `rerun_turn(session,
  channel=, emit=, message_id=, run_id=, content=)` archives that message and what came
  after it (an `archived` event says so) and runs it again, edited with `content` or as it
  was (no message named: the user's latest, which regenerates the last reply).
- Shape a turn (`TurnOptions`, all optional): `tools`, the tools it may use (None: all;
  names: those alone, its sub-agents too; False: a direct generation, the model alone with
  no tools, no agent prompt and one call), recorded with its run; `history`, the
  conversation before the message in OpenAI's format when the door's client sends its own
  (the stored one is then not read, though the turn is stored as usual); `instructions`,
  the client's own system text (after the agent's prompt, or the whole system message of a
  direct generation); `temperature` and `max_tokens` for its model calls.
- Hear why not: a turn that cannot start raises a `TurnError` (`InvalidInput` naming the
  field at fault, `SessionGone`, `ModelNotConfigured`) whose text is meant for the user.
  `validate_content`, `MAX_MESSAGE_CHARS` and `allowed_model` are the input rules every
  door applies before it records anything.
- Hand out a task (the REST door): `submit_task` records a turn as a run (with the `tools`
  it may use) and runs it now or queues it for the worker, returning the run; `cancel_task`
  stops one and returns it.
  `execute_task(run, owner=)` runs a queued one to its end (the worker's job).
- Answer a tool call that waits for a person: a run's turn that asked for such a tool ends
  `waiting` (`TurnResult.pending` lists the calls). `answer_approval` records a yes or a no
  (`ApprovalNotFound`, `ApprovalClosed` when there is nothing to answer, `ApprovalRefused`
  when, in a team chat, it is neither the sender's nor a team admin's to give) and says
  whether the turn may go on; `resume_turn(run_id, emit=)` goes on with it, and `resume_task` does
  so for the API and the worker; `approve_task` does both for a task. `pending_requests`
  lists what a session's waiting turns ask; `settle_approvals` (the sweep's) lets calls
  past their time count as declined and returns the runs to resume. `forget_always` takes
  back a session's "always" for a tool (its calls wait again from the next turn on).
- Show a session (the socket): `open_session(session)` reads what a chat shows as it opens
  (a `SessionOpening`: its latest page, whether a turn runs, the run still marked running,
  what its waiting turns ask and the model in use); `get_or_create_session`,
  `messages_for_display` and
  `history_page` (a page of it, the latest or an older one, with whether there is more),
  `version_page` (an earlier version of it, which an edit or a regeneration replaced),
  `has_running_turn`, `unfinished_run` and `get_run` read it (async); `choose_session_model`
  stores the model its owner picked (as `/model NAME` does, refused if not allowed) and
  `model_in_use` names the one its next turn talks to; `is_running_here` says whether this
  process runs its turn. `session_group` names the channel-layer group its sockets join,
  `user_group` the one every socket of a user joins, where `access_changed` tells them
  that the user's access changed (`ACCESS` messages; a login is named by its
  `credential_digest`); `layer_is_local` says whether this process's layer reaches only its
  own sockets,
  `GroupSink` sends a turn's shared events there, `listen_to_relayed` passes on what
  workers relayed through the database (returns the call that stops it), and
  `join_stream`/`leave_stream` ask for the text of a turn that is streaming elsewhere, and
  `join_stream_here`/`leave_stream_here` take it from one streaming in this event loop;
  `ChunkCoalescer` joins a stream's chunks into fewer frames for a socket.
- Keep a client's conversation (the OpenAI door): `mark_conversation(owner_id=, digest=,
  session_id=)` says which session a conversation, by a digest of its messages the door
  makes, continues; `conversation_session` finds it again. `keep_response` and
  `stored_response` keep and read the Responses API's answers (`StoredResponse`).
- Shape a turn for a client that brings its own tools and files (`TurnOptions`):
  `client_tools` are offered beside the agent's (a clash of names is an `InvalidInput`
  naming `tools[i]`), and a call of one ends the turn with `TurnResult.handed_over`; the
  client's results continue it (`continuation`). `tool_choice` holds for the first model
  call; `params` (`stop`, `seed`, `response_format`...) go with every call, and one the
  model cannot take is an `InvalidInput` naming it. `attachments` (the new message's files)
  are kept in the user's `uploads/` and shown to a model that takes them, else refused.
  `prepare_options(options, owner=, model=)` does all that before a door records anything.
- Read what a run did: `run_trace(run)`, its model calls and tool calls in order.
- Know a person's settings: `settings_for(user)` (sync) and `person_settings(user)` (async)
  give the operator's settings narrowed by the person's teams' policy (`teams_app.policy`):
  their models, tools, approvals, turn rate and `exec`'s network, which every turn reads
  when it starts; `refused_tools(names, conf)` says why some tools are not theirs, and
  `NoModelAllowed` is a turn refused because their policy leaves them no model.
- Count a turn against its user: `take_turn_slot(user_id)`, None when the turn may start,
  else the seconds to wait. `budget_refusal(user)` (async) and `check_budget(user)` say
  whether the user's daily budget is spent: an `OverBudget` (a `TurnError` with
  `retry_after`, the seconds until it renews), which `run_turn` and `submit_task` raise too.
- List the tools: `turn_registry(conf)` (async: the registry a turn gets), and
  `known_tool_names(conf)` and `tool_problems(conf)` without connecting to anything;
  `unknown_tools(names, conf)` (async): which of `names` no turn could be given;
  `hook_problems(conf)`: what is wrong with the operator's hooks (file and functions).
- Do background work (the jobs layer, `manage.py heartbeat`): `run_cron_job`,
  `report_dead_cron_runs`, `run_spawned_subagent`, `announce_subagent`,
  `heartbeat_users` and `user_heartbeat`, `consolidate_session` (coroutines that return
  how it went), `prune_relayed`; `delivering(work, what=)` makes a coroutine wait for the
  events it published before its event loop closes.
- End a deactivated user's work: `stop_user_turns(user_id=)` stops their running and
  queued turns and ends those that wait for a person, in every process.
- Reach the database from async code as the turn does (PostgreSQL's lanes, a connection
  that died replaced): `on_db(fn)` makes a sync function awaitable.
- Wire a process: `on_session_deleted` (a signal receiver), `write_through_database` (a
  worker's events go through the database when its channel layer is its own), and
  `watched_runs` (the runs this process's turns are running, for a worker that stops).

A name is loaded at its first use, with the module it lives in: a door pays for the parts
it asks for, not for the whole package. `load()` loads them all at once, for a process
about to fork workers that would otherwise each load them at their first job.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent.turn.answerers import ApprovalRefused
    from agent.turn.approvals import (
        ApprovalClosed,
        ApprovalNotFound,
        answer_approval,
        forget_always,
        pending_requests,
        settle_approvals,
    )
    from agent.turn.coalescer import ChunkCoalescer
    from agent.turn.consolidation import consolidate_session
    from agent.turn.conversations import (
        conversation_session,
        keep_response,
        mark_conversation,
        stored_response,
    )
    from agent.turn.cron_runs import report_dead_cron_runs, run_cron_job
    from agent.turn.db import on_db
    from agent.turn.fanout import (
        ACCESS,
        GroupSink,
        access_changed,
        credential_digest,
        delivering,
        on_session_deleted,
    )
    from agent.turn.groups import session_group, user_group
    from agent.turn.heartbeat import heartbeat_users, user_heartbeat
    from agent.turn.live import join_stream, join_stream_here, leave_stream, leave_stream_here
    from agent.turn.locks import is_running_here
    from agent.turn.opening import SessionOpening, open_session
    from agent.turn.options import Continuation, TurnOptions
    from agent.turn.outcome import TurnResult
    from agent.turn.policies import NoModelAllowed, person_settings, refused_tools, settings_for
    from agent.turn.ratelimit import take_turn_slot
    from agent.turn.refusals import (
        MAX_MESSAGE_CHARS,
        InvalidInput,
        ModelNotConfigured,
        SessionGone,
        TurnError,
        allowed_model,
        validate_content,
    )
    from agent.turn.relay import (
        layer_is_local,
        listen_to_relayed,
        prune_relayed,
        write_through_database,
    )
    from agent.turn.runs import approve_task, cancel_task, execute_task, resume_task, submit_task
    from agent.turn.service import (
        SessionRef,
        prepare_options,
        rerun_turn,
        resume_turn,
        run_turn,
    )
    from agent.turn.slash import choose_session_model, is_command, model_in_use
    from agent.turn.spending import OverBudget, budget_refusal, check_budget
    from agent.turn.store import (
        get_or_create_session,
        get_run,
        has_running_turn,
        history_page,
        is_member,
        messages_for_display,
        unfinished_run,
        version_page,
    )
    from agent.turn.subagent_runs import announce_subagent, run_spawned_subagent
    from agent.turn.toolbox import (
        hook_problems,
        known_tool_names,
        offered_tools,
        tool_problems,
        turn_registry,
        unknown_tools,
    )
    from agent.turn.trace import run_trace
    from agent.turn.user_stop import stop_user_turns
    from agent.turn.watch import watched_runs

# The module of the package each name of the interface lives in.
_PLACES = {
    "answerers": ("ApprovalRefused",),
    "approvals": (
        "ApprovalClosed",
        "ApprovalNotFound",
        "answer_approval",
        "forget_always",
        "pending_requests",
        "settle_approvals",
    ),
    "consolidation": ("consolidate_session",),
    "conversations": (
        "conversation_session",
        "keep_response",
        "mark_conversation",
        "stored_response",
    ),
    "cron_runs": ("report_dead_cron_runs", "run_cron_job"),
    "db": ("on_db",),
    "fanout": (
        "ACCESS",
        "GroupSink",
        "access_changed",
        "credential_digest",
        "delivering",
        "on_session_deleted",
    ),
    "groups": ("session_group", "user_group"),
    "heartbeat": ("heartbeat_users", "user_heartbeat"),
    "coalescer": ("ChunkCoalescer",),
    "live": ("join_stream", "join_stream_here", "leave_stream", "leave_stream_here"),
    "locks": ("is_running_here",),
    "opening": ("SessionOpening", "open_session"),
    "options": ("Continuation", "TurnOptions"),
    "outcome": ("TurnResult",),
    "policies": ("NoModelAllowed", "person_settings", "refused_tools", "settings_for"),
    "ratelimit": ("take_turn_slot",),
    "refusals": (
        "MAX_MESSAGE_CHARS",
        "InvalidInput",
        "ModelNotConfigured",
        "SessionGone",
        "TurnError",
        "allowed_model",
        "validate_content",
    ),
    "relay": ("listen_to_relayed", "layer_is_local", "prune_relayed", "write_through_database"),
    "runs": ("approve_task", "cancel_task", "execute_task", "resume_task", "submit_task"),
    "service": ("SessionRef", "prepare_options", "rerun_turn", "resume_turn", "run_turn"),
    "slash": ("choose_session_model", "is_command", "model_in_use"),
    "spending": ("OverBudget", "budget_refusal", "check_budget"),
    "store": (
        "get_or_create_session",
        "get_run",
        "has_running_turn",
        "history_page",
        "is_member",
        "messages_for_display",
        "unfinished_run",
        "version_page",
    ),
    "subagent_runs": ("announce_subagent", "run_spawned_subagent"),
    "toolbox": (
        "hook_problems",
        "known_tool_names",
        "offered_tools",
        "tool_problems",
        "turn_registry",
        "unknown_tools",
    ),
    "trace": ("run_trace",),
    "user_stop": ("stop_user_turns",),
    "watch": ("watched_runs",),
}
_MODULE_OF = {name: module for module, names in _PLACES.items() for name in names}

__all__ = [
    "ACCESS",
    "MAX_MESSAGE_CHARS",
    "ApprovalClosed",
    "ApprovalNotFound",
    "ApprovalRefused",
    "ChunkCoalescer",
    "Continuation",
    "GroupSink",
    "InvalidInput",
    "ModelNotConfigured",
    "NoModelAllowed",
    "OverBudget",
    "SessionGone",
    "SessionOpening",
    "SessionRef",
    "TurnError",
    "TurnOptions",
    "TurnResult",
    "access_changed",
    "allowed_model",
    "announce_subagent",
    "answer_approval",
    "approve_task",
    "budget_refusal",
    "cancel_task",
    "check_budget",
    "choose_session_model",
    "consolidate_session",
    "conversation_session",
    "credential_digest",
    "delivering",
    "execute_task",
    "forget_always",
    "get_or_create_session",
    "get_run",
    "has_running_turn",
    "heartbeat_users",
    "history_page",
    "hook_problems",
    "is_command",
    "is_member",
    "is_running_here",
    "join_stream",
    "join_stream_here",
    "keep_response",
    "known_tool_names",
    "layer_is_local",
    "leave_stream",
    "leave_stream_here",
    "listen_to_relayed",
    "load",
    "mark_conversation",
    "messages_for_display",
    "model_in_use",
    "offered_tools",
    "on_db",
    "on_session_deleted",
    "open_session",
    "pending_requests",
    "person_settings",
    "prepare_options",
    "prune_relayed",
    "refused_tools",
    "report_dead_cron_runs",
    "rerun_turn",
    "resume_task",
    "resume_turn",
    "run_cron_job",
    "run_spawned_subagent",
    "run_trace",
    "run_turn",
    "session_group",
    "settings_for",
    "settle_approvals",
    "stop_user_turns",
    "stored_response",
    "submit_task",
    "take_turn_slot",
    "tool_problems",
    "turn_registry",
    "unfinished_run",
    "unknown_tools",
    "user_group",
    "user_heartbeat",
    "validate_content",
    "version_page",
    "watched_runs",
    "write_through_database",
]


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # looked up once
    return value


def load() -> None:
    """Load every part of the package now."""
    for module in _PLACES:
        importlib.import_module(f"{__name__}.{module}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
