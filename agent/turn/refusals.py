"""Why a turn could not start, in words meant for the user, and the input rules behind them."""

from __future__ import annotations

import logging
import re

from agent.conf import MODEL_HELP, AgentSettings
from teams_app.policy import whose

logger = logging.getLogger(__name__)

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


class AccountInactive(TurnError):
    """The turn's owner was deactivated: nothing runs for them any more, at any door or in
    any background work, until staff activate them again."""

    def __init__(self, username: str) -> None:
        super().__init__(f"the account {username!r} is deactivated; nothing runs for it")


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


def allowed_models_text(conf: AgentSettings) -> str:
    """The ids users may pick, the default first, as a sentence can list them."""
    return ", ".join(conf.models)


def allowed_model(name: str, conf: AgentSettings) -> str:
    """`name` if the operator lets users pick it (AGENT_MODEL, AGENT_MODELS); refused
    otherwise, before anything is recorded or sent to a provider.

    A provider would answer an id it does not know with its own error text, and one it
    does know could cost the operator money they did not agree to spend."""
    validate_model_name(name)
    if not conf.models and conf.models_from == "operator":
        raise ModelNotConfigured()
    if name not in conf.models:
        if conf.models_from != "operator":
            # The person's policy narrowed the operator's list (`agent.turn.policies`).
            raise InvalidInput(
                f"the model {name} is not available to you ({whose(conf.models_from)} "
                f"allows: {allowed_models_text(conf) or 'none'})",
                field="model",
            )
        raise InvalidInput(
            f"the model {name} is not available here; choose one of: {allowed_models_text(conf)}",
            field="model",
        )
    return name


def choose_model(asked: str | None, stored: str, conf: AgentSettings, *, key: str) -> str:
    """The model a turn of session `key` talks to: the one `asked` for, else the session's
    `stored` choice, else AGENT_MODEL.

    One asked for (on the API, by the command line, carried by a queued task) that is not
    allowed (any more) is refused. The session's own choice (`/model`; cron jobs and the
    heartbeat copy it into the runs they queue) that the operator has since taken off the
    list falls back to AGENT_MODEL with a log line: the conversation goes on rather than
    failing until its owner picks another, and the stored choice is kept should it return.
    """
    if asked and asked != stored:
        return allowed_model(asked, conf)
    chosen = asked or stored
    if chosen and chosen in conf.models:
        return chosen
    if chosen:
        logger.warning(
            "%s uses %s, which AGENT_MODELS no longer allows; it gets %s instead",
            key,
            chosen,
            conf.model or "no model",
        )
    if not conf.model:
        raise ModelNotConfigured()
    return conf.model
