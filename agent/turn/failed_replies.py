"""A failed turn, as its chat shows it after a reload: what went wrong, as an error.

A turn that fails without a reply of the agent's (its model could not be reached, the
conversation overflowed the model's window, the process running it died) leaves no message
saying so: what it tells the person is its run's `text`. The chat showed that live as an
error (`MessageEvent.error`); a `history` page shows it the same way, as an entry of its own
(`"error": true`, no id) right after the run's last message. A failure the agent put in its
own words (`agent.loop.SPOKEN_FAILURES`) is saved as its message, and stays one.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Max

from sessions_app.models import Message, Run
from sessions_app.usage import run_usage


def with_failures(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`messages` (a page of the live conversation, oldest first, as `display.shown` gives
    them) with an error entry after the last message of each failed run that has no
    message of its own saying so. Runs whose last message is on a later page get theirs
    there."""
    run_ids = {message["run_id"] for message in messages if message.get("run_id")}
    if not run_ids:
        return messages
    failed = {
        str(run.pk): run
        for run in Run.objects.filter(pk__in=run_ids, status=Run.Status.FAILED).only(
            "id", "text", "usage", "cost"
        )
        if run.text
    }
    if not failed:
        return messages
    ends = dict(
        Message.objects.filter(run_id__in=failed, archived=False)
        .values("run_id")
        .annotate(last=Max("id"))
        .values_list("run_id", "last")
    )
    last_of = {str(run_id): last for run_id, last in ends.items()}
    spoken = {
        message["run_id"]
        for message in messages
        if message.get("role") == "assistant"
        and message.get("run_id") in failed
        and message.get("content") == failed[message["run_id"]].text
    }
    shown: list[dict[str, Any]] = []
    for message in messages:
        shown.append(message)
        run_id = message.get("run_id")
        if run_id in failed and run_id not in spoken and message.get("id") == last_of.get(run_id):
            # What the run used goes with what it ended with, as it did live.
            for earlier in shown:
                if earlier.get("run_id") == run_id:
                    earlier.pop("run_usage", None)
            shown.append(_error_entry(failed[run_id], message))
    return shown


def _error_entry(run: Run, last: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": None,
        "role": "assistant",
        "content": run.text,
        "error": True,
        "tool_calls": None,
        "tool_call_id": None,
        "name": None,
        "stopped": False,
        "reasoning_content": None,
        "run_id": str(run.pk),
        "run_usage": run_usage(run),
        "created": last.get("created"),
    }
