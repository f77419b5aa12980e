"""The async side's door to the database: every read and write the turn makes.

Django's ORM is synchronous; these wrappers are the one `sync_to_async` boundary, so the
rest of the agent stays plain async code.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.db import transaction

from sessions_app import memory as memories
from sessions_app import selectors, services
from skills_app import selectors as skill_selectors

get_or_create_session = sync_to_async(services.get_or_create_session)
start_run = sync_to_async(services.start_run)
add_message = sync_to_async(services.add_message)
finish_run = sync_to_async(services.finish_run)
set_session_model = sync_to_async(services.set_session_model)
archive_messages = sync_to_async(services.archive_messages)
recent_messages = sync_to_async(selectors.recent_messages)
request_stop = sync_to_async(services.request_stop)
get_session = sync_to_async(selectors.get_session)
unfinished_run = sync_to_async(selectors.unfinished_run)
get_run = sync_to_async(selectors.get_run)
runs_to_stop = sync_to_async(selectors.runs_to_stop)
has_running_turn = sync_to_async(selectors.has_running_turn)
messages_for_display = sync_to_async(selectors.messages_for_display)
beat = sync_to_async(services.beat)
queue_run = sync_to_async(services.queue_run)
begin_run = sync_to_async(services.begin_run)
cancel_run = sync_to_async(services.cancel_run)
queue_subagent = sync_to_async(services.queue_subagent)
fail_unfinished_run = sync_to_async(services.fail_unfinished_run)
relay = sync_to_async(services.relay)
relayed_after = sync_to_async(selectors.relayed_after)
last_relayed_id = sync_to_async(selectors.last_relayed_id)
subagent_run = sync_to_async(selectors.subagent_run)
offered_skills = sync_to_async(skill_selectors.offered_skills)
long_term_memory = sync_to_async(memories.long_term_memory)
latest_summary = sync_to_async(memories.latest_summary)


@sync_to_async
def more_unconsolidated_than(*, session_id: int, count: int) -> bool:
    # Looks `count` rows in, not at all of them: a session may hold a hundred thousand.
    return memories.unconsolidated(session_id=session_id)[count : count + 1].exists()


@sync_to_async
def enqueue(func: str, *args: Any, task_name: str) -> None:
    """Hand `func` (a dotted path) to the worker, once what the caller wrote is committed:
    before, the worker could look for rows it cannot see yet."""
    from django_q.tasks import async_task  # the queue's client loads with its first job

    transaction.on_commit(lambda: async_task(func, *args, task_name=task_name))
