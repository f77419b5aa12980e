"""Any JSON a chat frame can hold gets an answer: numbers Python cannot or should not read,
NaN and Infinity, keys given twice, nesting past the recursion limit. Each gets an error
frame and the socket goes on to answer the next message. The API and the OpenAI-compatible
door refuse the same numbers with a 400 that says why."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async
from rest_framework.test import APIClient

from sessions_app.models import Run
from tests.llm_server import ScriptedLLM
from tests.ws import open_chat, receive_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent_settings")]

HUGE = "9" * 5000  # past Python's 4300-digit limit for reading an integer


@pytest.mark.parametrize(
    ("frame", "reason"),
    [
        ('{"type": "message", "content": "hi", "n": ' + HUGE + "}", "integer longer than"),
        ('{"type": "earlier", "before": ' + HUGE + "}", "integer longer than"),
        ('{"type": "earlier", "before": 123456789012345678901234}', "integer longer than"),
        ('{"type": "message", "content": "hi", "x": 1e999999}', "too large"),
        ('{"type": "message", "content": "hi", "x": -1' + "0" * 400 + ".5}", "too large"),
        ('{"type": "message", "content": "hi", "x": NaN}', "NaN"),
        ('{"type": "message", "content": "hi", "x": Infinity}', "Infinity"),
        ('{"type": "earlier", "before": -Infinity}', "-Infinity"),
        ('{"type": "stop", "type": "message", "content": "hi"}', "key twice"),
        ('{"type": "message", "content": {"a": 1, "a": 2}}', "key twice"),
        ("[" * 50 + HUGE + "]" * 50, "integer longer than"),
    ],
    ids=[
        "huge-integer",
        "huge-id",
        "long-id",
        "huge-exponent",
        "huge-float",
        "nan",
        "infinity",
        "minus-infinity",
        "duplicate-type",
        "duplicate-nested",
        "nested-huge-integer",
    ],
)
async def test_a_frame_python_reads_badly_gets_an_error_and_the_socket_goes_on(
    llm: ScriptedLLM, token: str, frame: str, reason: str
) -> None:
    socket, _ = await open_chat("numbers", token)
    await socket.send_to(text_data=frame)
    error = await socket.receive_json_from(timeout=5)
    assert error["type"] == "error" and reason in error["message"], error
    assert not await Run.objects.aexists()

    llm.reply("Still here.")
    await socket.send_json_to({"type": "message", "content": "are you there?"})
    await receive_until(socket, "message", role="assistant", content="Still here.")
    await socket.disconnect()
    assert len(llm.requests) == 1


async def test_a_message_id_of_nineteen_digits_is_still_read(llm: ScriptedLLM, token: str) -> None:
    socket, _ = await open_chat("ids", token)
    await socket.send_to(text_data='{"type": "earlier", "before": 9223372036854775807}')
    frame = await socket.receive_json_from(timeout=5)
    assert frame["type"] == "earlier" and frame["messages"] == []
    await socket.disconnect()


async def test_the_api_refuses_a_huge_integer_with_a_plain_400(token: str) -> None:
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    body = '{"prompt": "hi", "wait": false, "n": ' + HUGE + "}"
    response = await sync_to_async(api.post)("/api/tasks", body, content_type="application/json")
    assert response.status_code == 400
    detail = response.json()["detail"]
    assert detail == "JSON parse error - a number in the body has more than 4300 digits."
    assert not await Run.objects.aexists()


async def test_the_openai_door_refuses_a_huge_integer_with_a_plain_400(token: str) -> None:
    api = APIClient()
    request = {"model": "agentsite", "messages": [{"role": "user", "content": "hi"}]}
    body = json.dumps(request)[:-1] + ', "max_tokens": ' + HUGE + "}"
    response = await sync_to_async(api.post)(
        "/v1/chat/completions",
        body,
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["message"].startswith("We could not parse the JSON body of your request.")
    assert not await Run.objects.aexists()
