"""The async side's door to the database: every read and write the turn makes.

Django's ORM is synchronous; these wrappers are the one `sync_to_async` boundary, so the
rest of the agent stays plain async code.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.db import transaction

from cron_app import selectors as job_selectors
from cron_app import services as job_services
from mcp_app import selectors as mcp_selectors
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
running_runs = sync_to_async(selectors.running_runs)
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
queue_run_unless_busy = sync_to_async(services.queue_run_unless_busy)
latest_session = sync_to_async(selectors.latest_session)
get_job = sync_to_async(job_selectors.get_job)
find_job = sync_to_async(job_selectors.find_job)
create_job = sync_to_async(job_services.create_job)
delete_job = sync_to_async(job_services.delete_job)
set_job_enabled = sync_to_async(job_services.set_enabled)
rearm_job = sync_to_async(job_services.rearm)
record_job_run = sync_to_async(job_services.record_run)


@sync_to_async
def jobs_of(*, owner_id: int | None) -> list[Any]:
    return list(job_selectors.jobs_of(owner=owner_id))


relayed_after = sync_to_async(selectors.relayed_after)
last_relayed_id = sync_to_async(selectors.last_relayed_id)
subagent_run = sync_to_async(selectors.subagent_run)
offered_skills = sync_to_async(skill_selectors.offered_skills)
enabled_mcp_servers = sync_to_async(mcp_selectors.enabled_servers)
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


@sync_to_async
def heartbeat_owner(username: str) -> Any:
    """Whom the heartbeat works for: the active user `username`, else the first superuser."""
    from django.contrib.auth import get_user_model

    users = get_user_model().objects.filter(is_active=True)
    if username:
        return users.filter(username=username).first()
    return users.filter(is_superuser=True).order_by("pk").first()
