"""What follows a user's account.

Their folder: a renamed user keeps their files, and a deleted user's folder is put aside,
so that a new account of the same name starts empty (as a deleted team's is).

Their access: once a change that may end it is committed (the user saved, deactivated,
deleted, a password changed, a token deleted, a login signed out), whichever process made
it tells the user's open sockets (`agent.turn.access_changed`), which check what let them
in and close if it no longer holds. A deactivated user's turns stop, and those that wait
for a person end (`agent.turn.stop_user_turns`). The turn package is imported when a
receiver first runs: every process loads this module with the app, and few change accounts.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import async_to_sync
from django.db import transaction

from agent.conf import agent_settings
from agent.tools.guards import folders
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


def retire_team_folder(sender: Any, instance: Any, **kwargs: Any) -> None:
    """`post_delete` of a group (a team's): once the delete is committed, the team's folder
    is put aside, as a deleted user's is."""
    slug = instance.name
    workspace = agent_settings().workspace

    def retire() -> None:
        try:
            folders.retire_team_folder(workspace, slug)
        except Exception:
            logger.exception("could not put aside the folder of the deleted team %r", slug)

    transaction.on_commit(retire, robust=True)


def end_access(sender: Any, instance: Any, created: bool, raw: bool = False, **kwargs: Any) -> None:
    """`post_save` of a user: their sockets check their access again (a password change
    ends their other logins; a deactivation all of it), and a deactivated user's turns stop.
    A sign-in's save, which changes only the time of the last one, changes no access."""
    update_fields = kwargs.get("update_fields")
    if raw or created or (update_fields is not None and set(update_fields) <= {"last_login"}):
        return
    from agent.turn import access_changed, stop_user_turns

    user_id = instance.pk
    deactivated = not getattr(instance, "is_active", True)

    async def tell() -> None:
        await access_changed(user_id)
        if deactivated:
            await stop_user_turns(user_id=user_id)

    _after_commit(tell, f"ending the access of user {user_id}")


def forget_access(sender: Any, instance: Any, **kwargs: Any) -> None:
    """`post_delete` of a user: their sockets close."""
    from agent.turn import access_changed

    user_id = instance.pk
    _after_commit(lambda: access_changed(user_id), f"closing the sockets of user {user_id}")


def end_token(sender: Any, instance: Any, **kwargs: Any) -> None:
    """`post_delete` of an API token: the sockets it opened close."""
    from agent.turn import access_changed

    user_id = instance.user_id
    _after_commit(lambda: access_changed(user_id), f"ending a token of user {user_id}")


def end_login(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    """`user_logged_out`: the sockets of that login close. The signal comes before the
    login's session is ended, so the message names it rather than let the sockets look."""
    session = getattr(request, "session", None)
    if user is None or session is None or not session.session_key:
        return
    from agent.turn import access_changed, credential_digest

    user_id, digest = user.pk, credential_digest(session.session_key)
    _after_commit(lambda: access_changed(user_id, credential=digest), f"signing out user {user_id}")


def follow_membership(
    sender: Any,
    instance: Any,
    action: str,
    reverse: bool,
    pk_set: set[int] | None,
    **kwargs: Any,
) -> None:
    """`m2m_changed` of users' groups: a person who left a team (or whose teams were all
    taken away) has their sockets check again, and those on the team's chats close."""
    if action == "pre_clear" and reverse:
        # Who the group held is gone by `post_clear`.
        instance._agent_cleared = list(instance.user_set.values_list("pk", flat=True))
        return
    if action not in ("post_remove", "post_clear"):
        return
    if reverse:
        users = list(pk_set or ()) if action == "post_remove" else instance._agent_cleared
    else:
        users = [instance.pk]
    from agent.turn import access_changed

    for user_id in users:
        _after_commit(functools.partial(access_changed, user_id), f"user {user_id} left a team")


def _after_commit(tell: Callable[[], Awaitable[None]], what: str) -> None:
    """Run the coroutine function `tell` once the change is committed, from sync code: on a
    loop of its own in a command or a shell, on the server's from a view's thread. It waits
    for the events it published (`delivering`); a failure is only logged, the change stands."""
    from agent.turn import delivering

    def run() -> None:
        try:
            async_to_sync(delivering(tell, what=what))()
        except Exception:
            logger.exception("%s failed", what)

    transaction.on_commit(run, robust=True)
