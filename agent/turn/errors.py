"""Why a turn could not start, in words meant for the user, and the input rules behind them."""

from __future__ import annotations

import re

from agent.conf import MODEL_HELP

MAX_MESSAGE_CHARS = 100_000
MODEL_NAME = re.compile(r"^[A-Za-z0-9._:/-]{1,200}$")
# Half of a UTF-16 pair on its own: JSON can carry it, but no text encoding can store it.
_SURROGATE = re.compile(r"[\ud800-\udfff]")


class TurnError(Exception):
    """A turn that could not start. `field` names the input at fault, if one is."""

    field: str | None = None


class InvalidInput(TurnError):
    def __init__(self, message: str, *, field: str = "content") -> None:
        super().__init__(message)
        self.field = field


class SessionGone(TurnError):
    field = "session"

    def __init__(self) -> None:
        super().__init__("this conversation was deleted")


class ModelNotConfigured(TurnError):
    field = "model"

    def __init__(self) -> None:
        super().__init__(MODEL_HELP)


def validate_content(content: object, *, field: str = "content") -> str:
    """The rules every door applies to a message, whichever protocol it came in by."""
    if not isinstance(content, str) or not content.strip():
        raise InvalidInput("the message is empty", field=field)
    if len(content) > MAX_MESSAGE_CHARS:
        raise InvalidInput(
            f"the message is longer than {MAX_MESSAGE_CHARS} characters", field=field
        )
    if "\x00" in content:
        raise InvalidInput("the message contains a NUL character", field=field)
    if _SURROGATE.search(content):
        raise InvalidInput("the message contains an unpaired surrogate character", field=field)
    return content


def validate_model_name(name: str) -> str:
    if not MODEL_NAME.match(name):
        raise InvalidInput(
            "a model name uses only letters, digits and . _ : / - (at most 200)", field="model"
        )
    return name
