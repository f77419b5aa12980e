"""Users' folders follow their accounts: a renamed user keeps their files, and a deleted
user's folder is put aside, so that a new account of the same name starts empty."""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction

from agent.conf import agent_settings
from agent.tools.guards.folders import rename_user_folder, retire_user_folder

logger = logging.getLogger(__name__)


def note_old_username(sender: Any, instance: Any, raw: bool = False, **kwargs: Any) -> None:
    """`pre_save` of a user: remember the name it had, to see a rename once it is saved."""
    field = sender.USERNAME_FIELD
    update_fields = kwargs.get("update_fields")
    if raw or instance.pk is None or (update_fields is not None and field not in update_fields):
        return  # a new user, or a save that leaves the name as it was (a login's)
    instance._agent_old_username = (
        sender._default_manager.filter(pk=instance.pk).values_list(field, flat=True).first()
    )


def follow_rename(
    sender: Any, instance: Any, created: bool, raw: bool = False, **kwargs: Any
) -> None:
    """`post_save` of a user: once a rename is committed, the folder takes the new name."""
    old = getattr(instance, "_agent_old_username", None)
    instance._agent_old_username = None
    new = instance.get_username()
    if raw or created or not old or old == new:
        return
    workspace = agent_settings().workspace

    def move() -> None:
        try:
            rename_user_folder(workspace, old, new)
        except Exception:  # the rename stands; the files wait where they were
            logger.exception("could not move the folder of %r to %r's", old, new)

    transaction.on_commit(move, robust=True)


def retire_folder(sender: Any, instance: Any, **kwargs: Any) -> None:
    """`post_delete` of a user: once the delete is committed, their folder is put aside."""
    username = instance.get_username()
    workspace = agent_settings().workspace

    def retire() -> None:
        try:
            retire_user_folder(workspace, username)
        except Exception:
            logger.exception("could not put aside the folder of the deleted user %r", username)

    transaction.on_commit(retire, robust=True)
