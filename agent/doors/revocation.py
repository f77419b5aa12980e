"""Chat sockets whose access ended are closed, in whichever process they are open.

Three things reach a socket whose user was deactivated or deleted, whose token was deleted
or whose login was signed out or ended by a password change:

- The channel layer, at once: the process that made the change (the admin's, the API's, a
  `manage.py` command's, a shell's) sends the user's group a message when it commits
  (`agent.accounts`), and each of the user's sockets checks its credential again. With
  Redis this reaches every web process.
- A poll: each web process looks at the credentials of all its open sockets together,
  in a few queries however many there are (`credentials.revoked`). Without Redis every
  process has a layer of its own, and nothing the layer carries gets from a command to
  the web server; the poll runs every `POLL_SECONDS` then, so that a socket closes
  within a second all the same. With Redis it runs every `BACKSTOP_SECONDS`, for a message
  the layer lost and for what no signal announces (a queryset `update()`, raw SQL, a login
  that expired).
- The socket itself, before each thing it does (`SocketAccess.allowed`): a revoked socket
  runs nothing, even before the layer or the poll reached it.

The workers' database relay (`agent.turn.relay`) is not used: its rows belong to a session,
a revocation belongs to a user, and deleting a user would delete the rows about them.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import weakref
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from agent import failures
from agent.doors.credentials import Credential, Revoked, credential_of, revoked
from agent.turn import layer_is_local, on_db, user_group

logger = logging.getLogger(__name__)

POLL_SECONDS = 0.5
BACKSTOP_SECONDS = 5.0

Revoke = Callable[[Revoked], Awaitable[None]]
_revoked = on_db(revoked)

# What a socket whose access ended says before it closes (a deleted user's socket closes
# as a deleted chat's does).
REVOKED_TEXT = {
    Revoked.INACTIVE: "your account has been deactivated: this chat is closed",
    Revoked.TOKEN: (
        "the token this chat was opened with has been deleted: open it again with a valid token"
    ),
    Revoked.EXPIRED: (
        "the token this chat was opened with has expired: open it again with a valid token"
    ),
    Revoked.LOGIN: "you have been signed out, or your password was changed: sign in again",
}


async def check(credential: Credential) -> Revoked | None:
    """Why `credential` no longer holds, or None while it does."""
    found = await _revoked([credential])
    return found.get(credential)


class CredentialPoll:
    """The open sockets of one event loop, by channel name, with their credentials and
    what closes each; and the task that looks at them while there are any."""

    def __init__(self) -> None:
        self.sockets: dict[str, tuple[Credential, Revoke]] = {}
        self.task: asyncio.Task[None] | None = None

    def watch(self, channel: str, credential: Credential, revoke: Revoke) -> Callable[[], None]:
        self.sockets[channel] = (credential, revoke)
        if self.task is None or self.task.done() or self.task.cancelling():
            # Serves every socket of the loop: started empty, not in the context of the
            # socket that happened to open first (see `agent.turn.db.detached_context`).
            self.task = asyncio.create_task(
                self._poll(), name="credential-poll", context=contextvars.Context()
            )

        def unwatch() -> None:
            self.sockets.pop(channel, None)
            if not self.sockets and self.task is not None:
                # Not left asleep for a poll's length: a loop that ends meanwhile (a test's,
                # a worker's) would be left a task it never finished.
                self.task.cancel()

        return unwatch

    async def _poll(self) -> None:
        try:
            await self._poll_while_watched()
        finally:
            # Nothing to watch: the poll goes, and with it its hold on the loop, which can
            # then be collected once it has run its course.
            loop = asyncio.get_running_loop()
            if not self.sockets and _polls.get(loop) is self:
                del _polls[loop]

    async def _poll_while_watched(self) -> None:
        while self.sockets:
            await asyncio.sleep(POLL_SECONDS if layer_is_local() else BACKSTOP_SECONDS)
            watched = dict(self.sockets)
            if not watched:
                return
            try:
                found = await _revoked({c for c, _ in watched.values()})
            except Exception:  # a database away for a moment must not end the poll
                logger.warning("could not check the credentials of open sockets", exc_info=True)
                continue
            for channel, (credential, revoke) in watched.items():
                why = found.get(credential)
                if why is None or channel not in self.sockets:
                    continue
                # Closed for good: nothing more to look at, whether the close got through.
                self.sockets.pop(channel, None)
                try:
                    # Shielded: the last socket going away meanwhile ends the poll, not this.
                    await asyncio.shield(revoke(why))
                except Exception:
                    logger.warning("could not close the revoked socket %s", channel, exc_info=True)


_polls: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, CredentialPoll] = (
    weakref.WeakKeyDictionary()
)


def watch_socket(channel: str, credential: Credential, revoke: Revoke) -> Callable[[], None]:
    """Have `revoke` called with the reason once `credential`, socket `channel`'s, no longer
    holds; returns the function that ends the watch (the socket closed)."""
    loop = asyncio.get_running_loop()
    poll = _polls.get(loop)
    if poll is None:
        poll = _polls[loop] = CredentialPoll()
    return poll.watch(channel, credential, revoke)


class SocketAccess:
    """What let one socket in, held to while it is open: it joins its user's group and the
    process's poll (`join`), answers the group's messages (`changed`) and says before each
    action whether the socket may act (`allowed`). When access has ended it calls `revoke`,
    the socket's own closing; `error` tells the socket's client of a failure."""

    def __init__(
        self,
        scope: Mapping[str, Any],
        *,
        layer: Any,
        channel: str,
        revoke: Revoke,
        error: Callable[[str], Awaitable[None]],
    ) -> None:
        self.credential = credential_of(scope)
        self.layer = layer
        self.channel = channel
        self.revoke = revoke
        self.error = error
        self.unwatch: Callable[[], None] = lambda: None

    async def join(self) -> None:
        await self.layer.group_add(user_group(self.credential.user_id), self.channel)
        self.unwatch = watch_socket(self.channel, self.credential, self.revoke)

    async def leave(self) -> None:
        self.unwatch()
        await self.layer.group_discard(user_group(self.credential.user_id), self.channel)

    async def allowed(self) -> bool:
        """Whether the socket may act: its access still holds. One whose access ended is
        revoked, and one that cannot tell (the database away) acts on nothing."""
        try:
            why = await check(self.credential)
        except Exception:
            ref = failures.log_failure(logger, "could not check the access of %s", self.channel)
            await self.error(failures.internal_error(ref))
            return False
        if why is None:
            return True
        await self.revoke(why)
        return False

    async def changed(self, message: Mapping[str, Any]) -> None:
        """The user's access changed (`agent.turn.ACCESS`): the credential is checked again.
        One the message names is ending even while its record is still there (a login
        being signed out), and is revoked all the same."""
        named = message.get("credential")
        if named and named != self.credential.digest:
            return
        why = await check(self.credential)
        if why is None and named:
            why = Revoked.TOKEN if self.credential.token else Revoked.LOGIN
        if why is not None:
            await self.revoke(why)
