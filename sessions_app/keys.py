"""Session keys, and the one rule for the ones a person can reach.

A key is `channel:chat_id`. People reach four channels: `web` (chats started on the chat
page), `api` (tasks sent to the API), `openai` (conversations of OpenAI clients, at
`/v1/chat/completions`) and `team` (a team's shared chats, which every member reaches).
Every door that takes a key or a chat id from a person checks it here: the chat page and
its socket, the API's task input and its `/api/sessions/<key>` routes, the OpenAI door's
session. So a session one door makes opens through the others,
and a key one door refuses, every door refuses. The command line's, scheduled jobs' and
the heartbeat's and sub-agents' sessions (`cli:`, `cron:`, `heartbeat`, `subagent:`) match
no pattern here: the agent opens them, no person names them.

A chat id travels as a URL path segment, so it keeps to characters that need no escaping
there, and it is never `.` or `..`, which browsers and proxies resolve away.

The page and its socket address a chat by a path segment: a web session by its bare chat id
(`/c/<id>/`, `/ws/chat/<id>/`, as the socket always has) and an API or OpenAI client's
session by its key (`/c/api:<id>/`, `/ws/chat/openai:<id>/`, `/c/team:<id>/`).
"""

from __future__ import annotations

import re

from django.urls import register_converter

# Each pattern is written to mean the same in Python (`fullmatch`) and in JavaScript
# (`^(?:…)$`): the chat page gets it from the server rather than keeping a copy of its own.
CHAT_ID_PATTERN = r"(?!\.\.?$)[A-Za-z0-9_.@-]{1,190}"
USER_CHANNELS = ("web", "api", "openai", "team")
TEAM_CHANNEL = "team"
SESSION_KEY_PATTERN = rf"(?:web|api|openai|team):{CHAT_ID_PATTERN}"
# The page's and the socket's path segment: a web chat id, or another session's whole key.
CHAT_PATH_PATTERN = rf"(?:(?:api|openai|team):)?{CHAT_ID_PATTERN}"

_CHAT_ID = re.compile(CHAT_ID_PATTERN)
_SESSION_KEY = re.compile(SESSION_KEY_PATTERN)
_CHAT_PATH = re.compile(CHAT_PATH_PATTERN)


def split_key(key: str) -> tuple[str, str]:
    """`(channel, chat_id)` of any key; a key without a colon (`heartbeat`) is both."""
    channel, _, chat_id = key.partition(":")
    return channel, chat_id or channel


def is_chat_id(chat_id: str) -> bool:
    return _CHAT_ID.fullmatch(chat_id) is not None


def is_user_key(key: str) -> bool:
    """Whether a person may name session `key` (their own `web:`, `api:` or `openai:`
    session, or a `team:` chat of one of their teams)."""
    return _SESSION_KEY.fullmatch(key) is not None


def is_team_key(key: str) -> bool:
    return key.startswith(f"{TEAM_CHANNEL}:")


def key_for_path(segment: str) -> str | None:
    """The session key a page or socket path segment names; None if it names none."""
    if _CHAT_PATH.fullmatch(segment) is None:
        return None
    return segment if segment.startswith(("api:", "openai:", "team:")) else f"web:{segment}"


def path_for_key(key: str) -> str:
    """The page and socket path segment of user key `key` (`key_for_path`'s inverse)."""
    if not is_user_key(key):
        raise ValueError(f"not a key people can reach: {key!r}")
    channel, chat_id = split_key(key)
    return chat_id if channel == "web" else key


class ChatPathConverter:
    """`<chat:key>`: a page or socket path segment, given to the view as its session key."""

    regex = CHAT_PATH_PATTERN

    def to_python(self, value: str) -> str:
        key = key_for_path(value)
        if key is None:
            raise ValueError(value)  # Django takes it as "no match": a 404
        return key

    def to_url(self, value: str) -> str:
        return path_for_key(value)


class SessionKeyConverter:
    """`<session_key:key>`: a whole user key, as the API's session routes take it."""

    regex = SESSION_KEY_PATTERN

    def to_python(self, value: str) -> str:
        if not is_user_key(value):
            raise ValueError(value)
        return value

    def to_url(self, value: str) -> str:
        return self.to_python(value)


# Registered on import, once per process: every URL module that uses the converters imports
# this module first, and Django refuses (from 6.0) to register a name twice.
register_converter(ChatPathConverter, "chat")
register_converter(SessionKeyConverter, "session_key")
