"""The OpenAI door's endpoints: `GET /v1/models` (and one model), `POST /v1/chat/completions`,
and an error in OpenAI's shape for any other path under `/v1/`.

Async views: the server (daphne) holds no thread for a request while its turn runs, and a
stream's events leave as the turn makes them.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import AsyncIterator, Callable, Coroutine
from functools import wraps
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth.models import User
from django.http import (
    HttpRequest,
    HttpResponse,
    HttpResponseBase,
    JsonResponse,
    StreamingHttpResponse,
)
from django.views.decorators.csrf import csrf_exempt

from agent import failures
from agent.conf import MODEL_HELP, AgentSettings
from agent.doors.openai import threads
from agent.doors.openai.auth import authenticate
from agent.doors.openai.chat_messages import Conversation
from agent.doors.openai.chat_request import SESSION_HEADER, read_chat_request
from agent.doors.openai.chat_turn import ChatTurn, turn_options
from agent.doors.openai.errors import SERVER_ERROR, OpenAIError, invalid, model_not_found
from agent.doors.openai.models import choice_of, model_ids, model_object
from agent.doors.openai.shapes import Reply
from agent.doors.openai.turns import over_budget, prepared
from agent.turn import budget_refusal, is_command, person_settings, take_turn_slot

logger = logging.getLogger(__name__)

View = Callable[..., Coroutine[Any, Any, HttpResponseBase]]


def openai_view(*methods: str) -> Callable[[View], View]:
    """An endpoint that answers every failure in OpenAI's shape, and only `methods`."""

    def wrap(view: View) -> View:
        @csrf_exempt  # a bearer token, never a cookie: nothing a forged page could use
        @wraps(view)
        async def answer(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
            try:
                if request.method not in methods:
                    allowed = ", ".join(methods)
                    raise OpenAIError(
                        405,
                        f"Invalid method for this path: {request.method}; use {allowed}.",
                        code="method_not_allowed",
                        headers={"Allow": allowed},
                    )
                return await view(request, *args, **kwargs)
            except OpenAIError as exc:
                return exc.response()
            except Exception:
                ref = failures.log_failure(logger, "%s %s failed", request.method, request.path)
                error = OpenAIError(500, failures.internal_error(ref), type=SERVER_ERROR)
                return error.response()

        return answer

    return wrap


@openai_view("GET")
async def models(request: HttpRequest) -> HttpResponse:
    user = await authenticate(request)
    data = [model_object(name) for name in model_ids(await person_settings(user))]
    return JsonResponse({"object": "list", "data": data})


@openai_view("GET")
async def model(request: HttpRequest, name: str) -> HttpResponse:
    user = await authenticate(request)
    if choice_of(name, await person_settings(user)) is None:
        raise model_not_found(name)
    return JsonResponse(model_object(name))


@openai_view("POST")
async def chat_completions(request: HttpRequest) -> HttpResponseBase:
    user = await authenticate(request)
    # The person's settings: their teams' models, under the operator's.
    conf = await person_settings(user)
    chat = read_chat_request(
        json_body(request, conf), session_header=request.headers.get(SESSION_HEADER), conf=conf
    )
    conversation = chat.conversation
    await admit(user, conf, conversation, direct=chat.choice.direct)
    options = await prepared(turn_options(chat), user=user, model=chat.choice.model)
    reply = Reply(model=chat.model, include_usage=chat.include_usage)
    thread = threads.Thread.of(
        conversation,
        direct=chat.choice.direct,
        session=chat.session,
        chat_id=request.headers.get(threads.CHAT_ID_HEADER),
    )
    session = await thread.session(user, new_id=reply.id)
    remember = thread.remember(user, session)
    turn = ChatTurn(chat, reply, options, user=user, session=session, remember=remember)
    # Until the turn has started, a refusal can still be an HTTP error of its own.
    await turn.started()
    headers = {"X-Request-Id": reply.id, "X-Session-Key": session.key}
    if not chat.stream:
        return JsonResponse(await turn.completion(), headers=headers)
    return event_stream(turn.stream(), headers)


def event_stream(events: AsyncIterator[bytes], headers: dict[str, str]) -> StreamingHttpResponse:
    response = StreamingHttpResponse(
        events, content_type="text/event-stream; charset=utf-8", headers=headers
    )
    response["Cache-Control"] = "no-cache"
    # Proxies such as nginx would otherwise hold the events back.
    response["X-Accel-Buffering"] = "no"
    return response


async def admit(
    user: User, conf: AgentSettings, conversation: Conversation, *, direct: bool
) -> None:
    """Refuse a turn that may not start: no model, a spent budget, or too many turns of
    late. Said before a session is made for it. A slash command costs no model call and
    `/stop` must always get through: it is not refused. A direct generation is one model
    call, not an agent's turn (a client's housekeeping makes several for each message), and
    the results of a client's tools go on with a turn counted already: the budget holds
    for them, the turn rate does not."""
    if conversation.turn is None and is_command(conversation.content):
        return
    counted = not direct and conversation.turn is None
    if not conf.models:
        raise OpenAIError(503, MODEL_HELP, type=SERVER_ERROR, code="model_not_configured")
    spent = await budget_refusal(user)
    if spent is not None:
        raise over_budget(spent)
    if not counted:
        return
    wait = await sync_to_async(take_turn_slot)(user.pk)
    if wait is not None:
        seconds = math.ceil(wait)
        raise OpenAIError(
            429,
            f"Rate limit reached: {conf.turn_rate} turns (AGENT_TURN_RATE). "
            f"Please try again in {seconds}s.",
            type="requests",
            code="rate_limit_exceeded",
            headers={"Retry-After": str(seconds)},
        )


@csrf_exempt
async def not_found(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
    """Any other path under /v1/."""
    message = f"Invalid URL ({request.method} {request.path})"
    return OpenAIError(404, message, code="unknown_url").response()


def json_body(request: HttpRequest, conf: AgentSettings) -> object:
    """The request's JSON. Its files come inside it (base64 images, and a client such as
    Open WebUI sends a chat's every image again with each message), so the cap is twice
    AGENT_MAX_UPLOAD_BYTES, or Django's own if that is larger."""
    limit = max(settings.DATA_UPLOAD_MAX_MEMORY_SIZE or 0, 2 * conf.max_upload_bytes)
    declared = int(request.META.get("CONTENT_LENGTH") or 0)
    # Read past Django's DATA_UPLOAD_MAX_MEMORY_SIZE, which `request.body` enforces.
    raw = request.read(limit + 1) if declared <= limit else b""
    if declared > limit or len(raw) > limit:
        message = f"The request body is too large: at most {limit} bytes are accepted."
        raise OpenAIError(413, message, code="request_too_large")
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        raise invalid(
            None,
            "We could not parse the JSON body of your request. The body must be JSON, sent "
            "with Content-Type: application/json.",
            code=None,
        ) from None
