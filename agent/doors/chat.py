"""The web chat door: one WebSocket per open chat, `/ws/chat/<chat_id>/` for the session
`web:<chat_id>`, and `/ws/chat/api:<id>/` or `/ws/chat/openai:<id>/` for a session of the
user's that the API or an OpenAI client started (the path segment is `sessions_app.keys`'
rule, which the route's converter applies).

The socket translates frames into `run_turn` calls and events back into frames. Each turn
runs as its own task (`socket_turns`), so `stop`, new messages, group events and a
disconnect are handled while it streams; a turn outlives a closed tab and is saved all the
same. Every socket of the session streams the reply: one that opens while a turn streams gets
the text so far, then the rest, and one already open joins a turn when it hears it start
(`join_stream`).
A turn waiting for a person asks every socket of its session (`approval_request`, also sent
to a socket as it opens); any of them may answer (`approve`), and the one whose answer lets
the turn go on runs the rest of it, as it runs a turn it started.

A socket belongs to its user and to one session row for its whole life: every user has
chat ids of their own, the socket's turns run in the row it opened, and when that row is
deleted the socket closes.

A socket lasts as long as what let it in (`credentials`): the user active, the token it came
with, the login its cookie holds. It checks them before it acts on any frame (every turn it
starts comes of one); a change reaches it through the user's group, and its process polls
(`revocation`). A socket whose access ended runs nothing, says why and closes with 4401, and
the turns it started stop: they ran on that access. (A tab that is merely closed leaves its
turn running.)
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async

from agent.doors import chat_frames
from agent.doors.credentials import Revoked
from agent.doors.frame_json import UnreadableFrame, read_frame
from agent.doors.joining import JoinMark
from agent.doors.revocation import REVOKED_TEXT, SocketAccess
from agent.doors.socket_turns import RUNNING, SocketTurns, without_replies
from agent.doors.team_socket import CLOSE_NOT_FOUND, TeamChatSocket
from agent.doors.watching import TurnViews
from agent.events import (
    Earlier,
    Emit,
    ErrorEvent,
    History,
    ModelChosen,
    StopDone,
    Version,
)
from agent.turn import (
    MAX_MESSAGE_CHARS,
    GroupSink,
    SessionGone,
    SessionRef,
    TurnError,
    answer_approval,
    budget_refusal,
    choose_session_model,
    forget_always,
    get_or_create_session,
    history_page,
    is_command,
    is_running_here,
    listen_to_relayed,
    open_session,
    rerun_turn,
    resume_turn,
    run_turn,
    session_group,
    take_turn_slot,
    validate_content,
    version_page,
)
from sessions_app.services import NoSuchChat

logger = logging.getLogger(__name__)

# The door, as the runs it starts record it, whichever session (web or API) it opened.
CHANNEL = "web"
CLOSE_UNAUTHENTICATED = 4401
CLOSE_DELETED = 4410
# A frame larger than any message the contract allows is refused before it is parsed.
MAX_FRAME_CHARS = MAX_MESSAGE_CHARS + 1_000
# Turns one socket may have started and not yet finished: one running, the rest waiting.
MAX_PENDING_TURNS = 3

# The turns of every socket of the process's, still running; known here by this name too.
_turns = RUNNING


class ChatConsumer(TeamChatSocket):
    session_key = ""
    session_id: int | None = None
    group = ""
    views: TurnViews | None = None

    async def connect(self) -> None:
        await self.accept()
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        # No key: the path matched the catch-all route (see routing), not the rule.
        key = self.scope["url_route"]["kwargs"].get("key")
        if key is None:
            await self.close(code=CLOSE_NOT_FOUND)
            return
        try:
            session = await get_or_create_session(key=key, owner=user)
        except NoSuchChat:  # another team's chat, or none: as any chat not theirs
            await self.close(code=CLOSE_NOT_FOUND)
            return
        self.user = user
        self.team_id = session.team_id
        self.access = SocketAccess(
            self.scope,
            layer=self.channel_layer,
            channel=self.channel_name,
            revoke=self._revoke,
            error=self._error,
        )
        self.session_key, self.session_id = session.key, session.pk
        self.turns = SocketTurns(
            channel=self.channel_name,
            session_id=lambda: self.session_id,
            label=self.session_key,
            send=self._send_frame,
            error=self._error,
            gone=self._close_deleted,
        )
        self.group = session_group(session.pk)
        self.mark = JoinMark(self.channel_layer, self.group, self.channel_name, self._group_event)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.access.join()
        await self.mark.send()
        self.stop_relay = listen_to_relayed()
        opening = await open_session(session, owner=self.user)
        page, running, unfinished = opening.page, opening.running, opening.unfinished
        frame = History(messages=page.messages, running=running, has_more=page.has_more).to_dict()
        frame["model"] = opening.model
        frame["allowed_tools"] = opening.allowed_tools
        await self.send_json(frame)
        for request in opening.requests:
            await self.send_json(request.to_dict())
        self.views = TurnViews(self.channel_name, self._send_frame)
        await self.join_presence(user, self._send_frame)
        if unfinished is not None:
            if running:
                self.views.stream(unfinished.pk)
            elif not is_running_here(session.pk):
                self.views.follow(str(unfinished.pk))

    async def disconnect(self, code: int) -> None:
        await self.leave_presence()
        if self.group:
            self.mark.stop()
            self.stop_relay()
            await self.channel_layer.group_discard(self.group, self.channel_name)
            await self.access.leave()
        if self.views is not None:
            await self.views.close()
        self.session_id = None

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if self.session_id is None:
            return
        if text_data is None or len(text_data) > MAX_FRAME_CHARS:
            await self._error(f"send a JSON text frame of at most {MAX_MESSAGE_CHARS} characters")
            return
        try:
            frame = read_frame(text_data)
        except UnreadableFrame as exc:
            await self._error(str(exc))
            return
        await self.receive_json(frame)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        # A socket whose access ended acts on nothing, even before it hears of the end.
        if not await self.access.allowed() or self.session_id is None:
            return
        kind = content.get("type") if isinstance(content, dict) else None
        if kind == "stop":
            self._stop()
            return
        if kind == "model":
            await self._choose_model(content.get("model"))
            return
        handler = _HANDLERS.get(str(kind))
        if handler is not None:
            reader, method = handler
            try:
                request = reader(content)
            except chat_frames.BadFrame as exc:
                await self._error(str(exc))
                return
            await getattr(self, method)(request)
            return
        if kind != "message":
            await self._error(f"unknown frame: {chat_frames.KNOWN_FRAMES}")
            return
        text = content.get("content")
        try:
            validate_content(text)
        except TurnError as exc:
            await self._refuse(str(exc))
            return
        # Commands cost no model call and /stop must always get through: only turns count.
        if not is_command(text) and not await self._admit():
            return
        self._start(text)

    async def _admit(self) -> bool:
        """Whether one more turn may start now: the socket's queue, the user's daily budget
        and their rate."""
        if len(self.turns) >= MAX_PENDING_TURNS:
            await self._refuse(
                f"{len(self.turns)} messages are already waiting for an answer; "
                "send this one when they are done, or stop them"
            )
            return False
        spent = await budget_refusal(self.user)
        if spent is not None:
            await self._refuse(str(spent), retry_after=spent.retry_after)
            return False
        wait = await sync_to_async(take_turn_slot)(self.user.pk)
        if wait is not None:
            seconds = math.ceil(wait)
            await self._refuse(
                f"too many messages: try again in {seconds} seconds", retry_after=seconds
            )
            return False
        return True

    async def _choose_model(self, model: object) -> None:
        """The page's model picker: the session's next turns use `model`, as after `/model`,
        and every tab of the chat shows it."""
        session_id = self.session_id
        if session_id is None:
            return
        try:
            chosen = await choose_session_model(session_id=session_id, model=model, owner=self.user)
        except SessionGone as exc:
            await self._error(str(exc))
            await self._close_deleted()
            return
        except TurnError as exc:
            await self._error(str(exc))
            return
        event = ModelChosen(model=chosen)
        await self._send_frame(event.to_dict())
        await GroupSink(session_id, origin=self.channel_name)(event)

    async def _approve(self, request: chat_frames.ApproveRequest) -> None:
        """Answer a call that waits for a person; once none of its turn's does, go on with
        the turn here. A call that is not there or no longer waits gets an error frame."""
        session_id = self.session_id
        assert session_id is not None  # `receive` checked it
        try:
            answer = await answer_approval(
                owner=self.user,
                session_id=session_id,
                call_id=request.call_id,
                allow=request.allow,
                always=request.always,
            )
        except TurnError as exc:
            await self._error(str(exc))
            return
        if answer.ready:
            run_id = answer.run_id
            self.turns.launch(lambda emit: resume_turn(run_id, emit=emit))

    async def _forget_always(self, request: chat_frames.ForgetAlwaysRequest) -> None:
        """Take back the chat's "always" for a tool: every tab hears the tools still
        allowed (`allowed_tools`), this one too, even when the tool was not among them."""
        session_id = self.session_id
        assert session_id is not None  # `receive` checked it
        try:
            await forget_always(session_id=session_id, tool=request.tool)
        except SessionGone as exc:
            await self._error(str(exc))
            await self._close_deleted()

    async def _earlier(self, request: chat_frames.EarlierRequest) -> None:
        """Send the messages right before `request.before` (and back to `request.back_to`)."""
        session_id = self.session_id
        assert session_id is not None  # `receive` checked it
        page = await history_page(
            session_id=session_id, before=request.before, back_to=request.back_to
        )
        frame = Earlier(before=request.before, messages=page.messages, has_more=page.has_more)
        await self._send_frame(frame.to_dict())

    async def _version(self, request: chat_frames.VersionRequest) -> None:
        """Send the earlier version of the conversation at `request.message_id`."""
        session_id = self.session_id
        assert session_id is not None  # `receive` checked it
        messages = await version_page(session_id=session_id, message_id=request.message_id)
        if messages is None:
            await self._error("there is no earlier version of this chat at that message")
            return
        await self._send_frame(Version(id=request.message_id, messages=messages).to_dict())

    async def _rerun(self, request: chat_frames.RerunRequest) -> None:
        """Run the conversation again from a message of the user's, counted as any turn is
        (`rerun_turn` refuses it while a turn of the chat runs or waits)."""
        if not await self._admit():
            return
        ref = SessionRef(self.session_key, owner=self.user, pinned_id=self.session_id)
        self.turns.launch(
            lambda emit: rerun_turn(
                ref,
                channel=CHANNEL,
                emit=emit,
                message_id=request.message_id,
                run_id=request.run_id,
                content=request.content,
            )
        )

    def _stop(self) -> None:
        """The stop button: `/stop`, answered to this socket alone as a `stopped` frame, not
        as a reply: the stopped turn's own end is what every tab shows."""
        ref = SessionRef(self.session_key, owner=self.user, pinned_id=self.session_id)

        async def stop(emit: Emit) -> None:
            done = await run_turn(ref, "/stop", channel=CHANNEL, emit=without_replies(emit))
            await self._send_frame(StopDone(message=done.text).to_dict())

        self.turns.launch(stop)

    def _start(self, content: str) -> None:
        # A second message while a turn runs is accepted and waits for that turn to end:
        # the turn service serialises turns per session.
        ref = SessionRef(self.session_key, owner=self.user, pinned_id=self.session_id)
        self.turns.launch(lambda emit: run_turn(ref, content, channel=CHANNEL, emit=emit))

    async def session_event(self, message: dict[str, Any]) -> None:
        """An event of this session from another socket, process, job or sub-agent.

        Channels routes group messages of type `session.event` (`fanout.HANDLER`) here.
        """
        if not self.mark.hold(message):
            await self._group_event(message)

    async def session_joined(self, message: dict[str, Any]) -> None:
        """A socket's mark (`joining.JOINED`): this one's lets its group's frames through."""
        await self.mark.came_back(message)

    async def _group_event(self, message: dict[str, Any]) -> None:
        if message.get("origin") == self.channel_name:
            return
        frame = message["frame"]
        await self._send_frame(frame)
        if self.views is not None:
            self.views.heard(frame)

    async def live_joined(self, message: dict[str, Any]) -> None:
        """The running turn took this socket's request to join its stream (`join_stream`);
        its frames follow."""
        if self.views is not None:
            self.views.took()

    async def user_access(self, message: dict[str, Any]) -> None:
        """The user's access changed (`fanout.ACCESS`); on a team chat, their membership
        may have: one who left the team loses the chat at once."""
        if self.session_id is not None:
            await self.access.changed(message)
        await self.still_a_member(self.user.pk, self._error)

    async def _revoke(self, why: Revoked) -> None:
        """Close the socket for good, its access having ended, and stop the turns it
        started. A user who is gone took their chats with them: their socket closes as a
        deleted chat's does."""
        if self.session_id is None:
            return
        self.turns.cancel()
        if why is Revoked.DELETED:
            await self.session_closed({})
        else:
            await self._error(REVOKED_TEXT[why])
            self.session_id = None
            await self.close(code=CLOSE_UNAUTHENTICATED)
        # Nothing more to hear or look at, even before the client's end of the close.
        await self.access.leave()

    async def session_closed(self, message: dict[str, Any]) -> None:
        """The session was deleted (`fanout.CLOSED`)."""
        await self._error("this chat was deleted")
        await self._close_deleted()

    async def _close_deleted(self) -> None:
        if self.session_id is not None:
            self.session_id = None
            await self.close(code=CLOSE_DELETED)

    async def _send_frame(self, frame: dict[str, Any]) -> None:
        if self.session_id is None:
            return  # the tab closed; the turn goes on without it
        try:
            await self.send_json(frame)
        except Exception:  # the socket went away between the check and the send
            logger.debug("dropped a frame for a closed socket", exc_info=True)

    async def _error(self, message: str) -> None:
        await self._send_frame(ErrorEvent(message=message).to_dict())

    async def _refuse(self, message: str, *, retry_after: int | None = None) -> None:
        """Say that the message frame just received was not taken, and why."""
        refusal = ErrorEvent(message=message, retry_after=retry_after, refused=True)
        await self._send_frame(refusal.to_dict())


# The frames `chat_frames` reads: each one's reader and the consumer's method that acts on
# what it read.
_HANDLERS: dict[str, tuple[Callable[[dict[str, Any]], Any], str]] = {
    "approve": (chat_frames.read_approve, "_approve"),
    "forget_always": (chat_frames.read_forget_always, "_forget_always"),
    "earlier": (chat_frames.read_earlier, "_earlier"),
    "regenerate": (chat_frames.read_regenerate, "_rerun"),
    "edit": (chat_frames.read_edit, "_rerun"),
    "version": (chat_frames.read_version, "_version"),
}
