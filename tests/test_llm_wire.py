"""What only the lean path does: OpenAI's own parameters, no litellm import, the wire's
edge cases (huge lines, errors in a 200, bodies that are not UTF-8, lingering answers)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent.llm.error_kinds import NO_KEY, LLMError
from tests.conftest import ROOT, make_llm
from tests.llm_server import ScriptedLLM


async def test_openai_itself_gets_its_own_parameters(llm: ScriptedLLM) -> None:
    llm.reply("from a reasoning model").reply("from a chat model")
    reasoning = make_llm(
        llm,
        "auto",
        model="openai/gpt-5-mini",
        api_base="",
        api_key="",
        openai_base=llm.base_url,
        openai_key="sk-from-openai-api-key",
    )
    assert (await reasoning.stream([{"role": "user", "content": "x"}])).content
    sent = llm.requests[0]
    assert sent["model"] == "gpt-5-mini"
    assert sent["max_completion_tokens"] == 4096
    assert "max_tokens" not in sent and "temperature" not in sent
    assert llm.headers[0]["Authorization"] == "Bearer sk-from-openai-api-key"

    chat = make_llm(llm, "auto", model="openai/gpt-4o-mini", api_base="", openai_base=llm.base_url)
    await chat.stream([{"role": "user", "content": "x"}])
    assert llm.requests[1]["temperature"] == 0.1
    assert llm.headers[1]["Authorization"] == "Bearer test-key"


async def test_openai_without_a_key_is_an_auth_error(llm: ScriptedLLM) -> None:
    model = make_llm(llm, "auto", api_base="", api_key="", openai_base=llm.base_url)
    with pytest.raises(LLMError) as caught:
        await model.stream([{"role": "user", "content": "x"}])
    assert caught.value.kind == "auth" and str(caught.value) == NO_KEY
    assert "OPENAI_API_KEY" in caught.value.detail
    assert llm.requests == []


def test_the_lean_path_never_imports_litellm_and_closes_its_pool(llm: ScriptedLLM) -> None:
    llm.reply("lean and quick")
    program = f"""
import asyncio, sys
from agent.llm.client import LLM, LLMConfig
config = LLMConfig(model="openai/scripted", api_base={llm.base_url!r})
response = asyncio.run(LLM(config).stream([{{"role": "user", "content": "x"}}]))
assert response.content == "lean and quick", response
heavy = sorted(
    name for name in ("litellm", "openai", "tiktoken", "tenacity") if name in sys.modules
)
assert not heavy, heavy
from agent.llm import wire as llm_wire
assert not llm_wire._pools, "the loop's pool outlived it"
"""
    done = subprocess.run(
        [sys.executable, "-X", "dev", "-c", program],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    # The loop's connection pool was closed with the loop, not left to the collector.
    assert "Unclosed" not in done.stderr and "ResourceWarning" not in done.stderr, done.stderr


async def test_other_providers_go_through_litellm(llm: ScriptedLLM) -> None:
    # litellm's hosted_vllm provider speaks OpenAI's protocol, so the scripted server can
    # stand in for it; any provider prefix but openai/ is litellm's.
    llm.reply("via litellm", usage={"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5})
    model = make_llm(llm, "auto", model="hosted_vllm/scripted")
    assert model.wire is None
    response = await model.stream([{"role": "user", "content": "x"}])
    assert response.content == "via litellm"
    assert response.usage["total_tokens"] == 5
    assert llm.requests[0]["model"] == "scripted"


async def test_a_tool_call_sent_as_one_huge_line_arrives_whole(llm: ScriptedLLM) -> None:
    content = "x" * 3_000_000  # three lines of a megabyte each: the scripted server splits it
    llm.tool_call("write_file", {"path": "big.txt", "content": content})
    response = await make_llm(llm, "auto").stream([{"role": "user", "content": "x"}])
    (call,) = response.tool_calls
    assert json.loads(call.arguments) == {"path": "big.txt", "content": content}


async def test_an_error_inside_a_200_answer_is_an_error(llm: ScriptedLLM) -> None:
    llm.fault(200, body={"error": {"message": "model 'x' not found", "code": 404}})
    with pytest.raises(LLMError) as caught:
        await make_llm(llm, "auto").stream([{"role": "user", "content": "x"}])
    assert caught.value.kind == "bad_request" and "not found" in caught.value.detail
    assert str(caught.value) == "the model id is not one the provider recognises"


async def test_an_error_page_that_is_not_utf8_keeps_its_status(llm: ScriptedLLM) -> None:
    llm.fault(503, raw=b"<html>Service \xe9puis\xe9 \xff</html>").reply("back")
    retried: list[LLMError] = []

    async def on_retry(attempt: int, delay: float, error: LLMError) -> None:
        retried.append(error)

    response = await make_llm(llm, "auto").stream(
        [{"role": "user", "content": "x"}], on_retry=on_retry
    )
    assert response.content == "back"
    assert retried[0].status == 503 and "Service" in retried[0].detail
    assert "<html>" not in str(retried[0])


async def test_an_answer_that_lingers_after_done_is_not_retried(llm: ScriptedLLM) -> None:
    llm.reply("complete", linger=5)
    started = time.monotonic()
    response = await make_llm(llm, "auto", timeout=3.0).stream([{"role": "user", "content": "x"}])
    assert response.content == "complete"
    assert time.monotonic() - started < 2.5 and len(llm.requests) == 1


async def test_netrc_credentials_do_not_clash_with_the_key(
    llm: ScriptedLLM, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    netrc = tmp_path / "netrc"
    netrc.write_text("machine 127.0.0.1 login someone password secret\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    llm.reply("fine")
    response = await make_llm(llm, "auto").stream([{"role": "user", "content": "x"}])
    assert response.content == "fine"
    assert llm.headers[0]["Authorization"] == "Bearer test-key"
