"""The Responses API's endpoints: `POST /v1/responses` and `GET /v1/responses/{id}`."""

from __future__ import annotations

import dataclasses

from django.http import HttpRequest, HttpResponseBase, JsonResponse

from agent.doors.openai.auth import authenticate
from agent.doors.openai.chat_request import SESSION_HEADER
from agent.doors.openai.errors import OpenAIError, invalid
from agent.doors.openai.responses_request import CONTINUED, read_responses_request
from agent.doors.openai.responses_shapes import ResponseShape
from agent.doors.openai.responses_turn import ResponseTurn
from agent.doors.openai.threads import CHAT_ID_HEADER, Thread
from agent.doors.openai.turns import client_options, prepared
from agent.doors.openai.views import admit, event_stream, json_body, openai_view
from agent.turn import person_settings, stored_response

PREVIOUS = "previous_response_id"


@openai_view("POST")
async def responses(request: HttpRequest) -> HttpResponseBase:
    user = await authenticate(request)
    conf = await person_settings(user)
    asked = read_responses_request(
        json_body(request, conf), session_header=request.headers.get(SESSION_HEADER), conf=conf
    )
    conversation = asked.conversation
    thread = None
    if asked.previous is not None:
        previous = await stored_response(response_id=asked.previous, owner_id=user.pk)
        if previous is None:
            raise invalid(
                PREVIOUS,
                f"Previous response with id '{asked.previous}' not found.",
                code="previous_response_not_found",
            )
        session = previous.session
        if conversation.content == CONTINUED:
            conversation = dataclasses.replace(conversation, content=previous.prompt)
    await admit(user, conf, conversation, direct=asked.choice.direct)
    options = client_options(
        conversation,
        direct=asked.choice.direct,
        tools=asked.tools,
        params=asked.params,
        temperature=asked.temperature,
        max_tokens=asked.max_tokens,
        # With a previous response, the conversation is the one kept on the server.
        stored_history=asked.previous is not None,
    )
    options = await prepared(options, user=user, model=asked.choice.model)
    shape = ResponseShape(model=asked.model, echo=asked.echo)
    if asked.previous is None:
        thread = Thread.of(
            conversation,
            direct=asked.choice.direct,
            session=asked.session,
            chat_id=request.headers.get(CHAT_ID_HEADER),
        )
        session = await thread.session(user, new_id=shape.id)
    turn = ResponseTurn(
        conversation.content,
        options,
        model=asked.choice.model,
        stream=asked.stream,
        shape=shape,
        user=user,
        session=session,
        store=asked.store,
        remember=thread.remember(user, session) if thread is not None else None,
    )
    await turn.started()
    headers = {"X-Request-Id": shape.id, "X-Session-Key": session.key}
    if not asked.stream:
        return JsonResponse(await turn.whole(), headers=headers)
    return event_stream(turn.stream(), headers)


@openai_view("GET")
async def response(request: HttpRequest, response_id: str) -> HttpResponseBase:
    user = await authenticate(request)
    found = await stored_response(response_id=response_id, owner_id=user.pk)
    if found is None:
        raise OpenAIError(404, f"Response with id '{response_id}' not found.")
    return JsonResponse(found.body)
