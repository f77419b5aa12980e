"""The LLM adapter: one interface to every model, two ways to reach it.

Models served over OpenAI's chat-completions protocol (`openai/<name>`: OpenAI itself and
every OpenAI-compatible server) are spoken to directly (`agent.llm.wire`); every other
provider goes through litellm (`agent.llm.litellm_adapter`), imported only when such a model is
used. Either way this module streams one completion with tool definitions, assembles the
streamed tool-call deltas, retries transient failures with exponential backoff (honouring
Retry-After; `agent.llm.retries`), and turns every failure into an `LLMError` whose `kind`
tells the loop what to do.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from agent.cleantext import PieceCleaner, clean_text
from agent.llm import litellm_adapter, model_table, wire
from agent.llm.error_kinds import LLMError, classify
from agent.llm.tool_calls import ToolCall, ToolCallAssembler, field_of

if TYPE_CHECKING:
    from agent.llm.retries import RetryCallback

logger = logging.getLogger(__name__)

TextCallback = Callable[[str], Awaitable[None]]
Backend = Literal["auto", "litellm"]

_CONTEXT_WINDOW_TTL = 300.0
DEFAULT_CONTEXT_WINDOW = 32768


@dataclass(frozen=True, slots=True)
class LLMConfig:
    model: str
    api_base: str = ""
    api_key: str = ""
    temperature: float = 0.1
    max_tokens: int = 4096
    context_window: int = 0
    timeout: float = 120.0
    max_retries: int = 4
    retry_budget: float = 60.0
    # "litellm" sends OpenAI-compatible models through litellm too.
    backend: Backend = "auto"
    # Where `openai/<name>` goes when no api_base is set: OpenAI, or OPENAI_BASE_URL.
    openai_base: str = ""
    openai_key: str = ""
    # US dollars per prompt and per completion token, when the operator priced the model
    # (AGENT_MODEL_PRICES); otherwise litellm's table prices it, or nothing does.
    price: tuple[float, float] | None = None
    # A client's own generation parameters (`stop`, `seed`, `top_p`, `response_format`,
    # `parallel_tool_calls`...), sent as they are with every call.
    params: tuple[tuple[str, Any], ...] = ()
    # Models the operator says take images, beyond those litellm's table says do.
    vision_models: tuple[str, ...] = ()

    @property
    def endpoint(self) -> str | None:
        """The server the calls go to, without credentials, for the operator's own messages
        (a user's show no host); None for a provider that litellm finds itself."""
        if needs_litellm(self.model, self.backend):
            base = self.api_base
        else:
            base = wire.base_url(api_base=self.api_base, openai_base=self.openai_base)
        return wire.without_credentials(base) if base else None


def needs_litellm(model: str, backend: str = "auto") -> bool:
    """Whether the model is reached through litellm rather than spoken to directly."""
    return backend == "litellm" or not model.startswith("openai/")


@dataclass(slots=True)
class LLMResponse:
    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    reasoning_content: str = ""
    usage: dict[str, int] = field(default_factory=dict)
    finish_reason: str | None = None
    cost: float | None = None
    # The answer's log probabilities (OpenAI's `logprobs.content`), when they were asked for.
    logprobs: list[Any] = field(default_factory=list)


def _cleaned(error: LLMError) -> LLMError:
    """`error` with its words cleaned (`agent.cleantext`): a provider's error message is
    text from outside too, which a run's record stores and a user reads."""
    said = str(error)
    if clean_text(said) is not said:
        error.args = (clean_text(said), *error.args[1:])
    error.detail = clean_text(error.detail)
    return error


class LLM:
    """One configured model. Cheap to build: connections are pooled per process."""

    def __init__(self, config: LLMConfig) -> None:
        self.config = config
        self.wire: wire.WireTarget | None = None
        if not needs_litellm(config.model, config.backend):
            self.wire = wire.target(
                config.model,
                api_base=config.api_base,
                api_key=config.api_key,
                openai_base=config.openai_base,
                openai_key=config.openai_key,
            )

    async def stream(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        *,
        on_text: TextCallback | None = None,
        on_reasoning: TextCallback | None = None,
        on_retry: RetryCallback | None = None,
        tool_choice: str | dict[str, Any] = "auto",
    ) -> LLMResponse:
        """Stream one completion, retrying transient failures within the retry budget.

        `tool_choice` can force a tool: `{"type": "function", "function": {"name": …}}`.
        A provider that does not allow forcing answers with a `bad_request` LLMError; the
        caller may then try again with "auto"."""

        async def once() -> LLMResponse:
            try:
                return await self._stream_once(messages, tools, on_text, on_reasoning, tool_choice)
            except asyncio.CancelledError:
                raise
            except LLMError as error:
                _cleaned(error)
                raise
            except Exception as exc:  # every failure is classified; none escapes raw
                sort = classify if self.wire is not None else litellm_adapter.classify
                raise _cleaned(sort(exc)) from exc

        try:
            return await once()
        except LLMError as error:
            if not error.transient or self.config.max_retries < 1:
                raise
            from agent.llm import retries  # tenacity, loaded once a call has failed

            return await retries.call_again(
                once,
                error,
                max_retries=self.config.max_retries,
                budget=self.config.retry_budget,
                on_retry=on_retry,
            )

    def _chunks(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        tool_choice: str | dict[str, Any],
        max_tokens: int,
    ) -> AsyncGenerator[Any, None]:
        cfg = self.config
        if self.wire is not None:
            body = wire.request_body(
                self.wire,
                messages,
                tools,
                temperature=cfg.temperature,
                max_tokens=max_tokens,
                tool_choice=tool_choice,
            )
            body.update(cfg.params)
            return wire.stream_chunks(self.wire, body, http_timeout=cfg.timeout)
        request = litellm_adapter.request_kwargs(
            cfg.model,
            messages,
            tools,
            api_base=cfg.api_base,
            api_key=cfg.api_key,
            temperature=cfg.temperature,
            max_tokens=max_tokens,
            timeout=cfg.timeout,
            tool_choice=tool_choice,
        )
        request.update(cfg.params)
        return litellm_adapter.stream_chunks(request)

    async def _stream_once(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        on_text: TextCallback | None,
        on_reasoning: TextCallback | None,
        tool_choice: str | dict[str, Any] = "auto",
    ) -> LLMResponse:
        result = LLMResponse()
        text: list[str] = []
        reasoning: list[str] = []
        assembler = ToolCallAssembler()
        # Each piece is cleaned (`agent.cleantext`) before anyone sees it, so that what
        # streams joins up to exactly the text that is kept.
        text_cleaner, reasoning_cleaner = PieceCleaner(), PieceCleaner()
        idle = self.config.timeout
        loop = asyncio.get_running_loop()
        # Pushing the deadline costs a timer; once per tenth of it per chunk is plenty.
        push_every = min(1.0, idle / 10)
        pushed = loop.time()
        if self.wire is None:
            # Seconds of import, the first time: in a thread, so that the server's other
            # sessions go on meanwhile, and before the deadline starts.
            await asyncio.to_thread(litellm_adapter.load)
        # Never more than the model can write: providers refuse a larger request outright.
        chunks = self._chunks(messages, tools, tool_choice, await self.output_tokens())
        try:
            # One deadline that every received chunk pushes forward: a hung response
            # fails after `timeout` seconds of silence, however long the whole answer runs.
            async with contextlib.aclosing(chunks), asyncio.timeout(idle) as deadline:
                async for chunk in chunks:
                    now = loop.time()
                    if now - pushed >= push_every:
                        deadline.reschedule(now + idle)
                        pushed = now
                    usage = field_of(chunk, "usage")
                    if usage:
                        result.usage = _usage_dict(usage)
                    choices = field_of(chunk, "choices")
                    if not choices:
                        continue
                    choice = choices[0]
                    logprobs = field_of(choice, "logprobs")
                    if logprobs:
                        result.logprobs.extend(_plain(field_of(logprobs, "content") or ()))
                    finish = field_of(choice, "finish_reason")
                    if finish:
                        result.finish_reason = finish
                    delta = field_of(choice, "delta")
                    if delta is None:
                        continue
                    # DeepSeek and vLLM call it reasoning_content; OpenRouter and Ollama,
                    # reasoning.
                    piece = field_of(delta, "reasoning_content") or field_of(delta, "reasoning")
                    if piece and isinstance(piece, str):
                        await _add(reasoning_cleaner.piece(piece), reasoning, on_reasoning)
                    piece = field_of(delta, "content")
                    if piece and isinstance(piece, str):
                        await _add(text_cleaner.piece(piece), text, on_text)
                    for fragment in field_of(delta, "tool_calls") or ():
                        assembler.add(fragment)
        except TimeoutError as exc:
            raise LLMError(
                f"the model sent nothing for {idle:g} seconds", kind="transient"
            ) from exc
        await _add(reasoning_cleaner.rest(), reasoning, on_reasoning)
        await _add(text_cleaner.rest(), text, on_text)
        result.content = "".join(text)
        result.reasoning_content = "".join(reasoning)
        result.tool_calls = assembler.calls()
        result.cost = self._cost(result.usage)
        return result

    async def cost_of(self, usage: dict[str, int]) -> float | None:
        """What `usage` would cost at this model's price, reckoned as a call's `cost` is
        (None: the price is unknown), such as the most a call may cost before it is made."""
        if self.config.price is None and self.wire is None:
            # litellm's prices: its import takes seconds the first time, in a thread.
            await asyncio.to_thread(litellm_adapter.load)
        return self._cost(usage)

    def _cost(self, usage: dict[str, int]) -> float | None:
        if not usage:
            return None
        if self.config.price is not None:
            prompt_price, completion_price = self.config.price
            return (
                usage.get("prompt_tokens", 0) * prompt_price
                + usage.get("completion_tokens", 0) * completion_price
            )
        if self.wire is not None:
            return model_table.cost(self.config.model, usage)
        return litellm_adapter.cost(self.config.model, usage)

    async def refused_params(self, names: list[str]) -> list[str]:
        """Which of the OpenAI parameters `names` this model's provider does not take. A
        server spoken to directly speaks OpenAI's protocol and gets them all (it answers
        for itself); litellm knows what each of its providers takes."""
        if self.wire is not None or not names:
            return []
        supported = await asyncio.to_thread(litellm_adapter.supported_params, self.config.model)
        if supported is None:
            return []
        return [name for name in names if name not in supported]

    def accepts(self, kind: str) -> bool:
        """Whether the model takes input of `kind` (`image`, `audio`, `file`), by litellm's
        model table or the operator's word (`AGENT_VISION_MODELS`, for images)."""
        if kind == "image" and self.config.model in self.config.vision_models:
            return True
        return model_table.accepts(self.config.model, kind)

    async def context_window(self, *, refresh: bool = False) -> int:
        """Tokens the model accepts: the configured override, what the server says (an
        OpenAI-compatible server's /models), litellm's model table, or a safe default.
        Discovered once per five minutes; `refresh` asks again (after an overflow)."""
        cfg = self.config
        if cfg.context_window > 0:
            return cfg.context_window
        window, _ = await self._limits(refresh=refresh)
        return window

    async def output_tokens(self) -> int:
        """Tokens to keep free for the answer: the configured maximum, or the model's own
        output limit (the server's word, else the model table's) where that is lower."""
        _, limit = await self._limits()
        return min(self.config.max_tokens, limit) if limit else self.config.max_tokens

    async def _limits(self, *, refresh: bool = False) -> tuple[int, int | None]:
        cfg = self.config
        key = (cfg.model, cfg.api_base)
        cached = _limits.get(key)
        if cached and cached[2] > time.monotonic() and not refresh:
            return cached[0], cached[1]
        window, output = await _served_limits(cfg)
        if window is None and self.wire is not None:
            window = model_table.context_window(cfg.model)
        elif window is None:
            # The first use imports litellm: in a thread, as in `_stream_once`.
            window = await asyncio.to_thread(litellm_adapter.context_window, cfg.model)
        window = window or DEFAULT_CONTEXT_WINDOW
        output = output or model_table.max_output_tokens(cfg.model)
        _limits[key] = (window, output, time.monotonic() + _CONTEXT_WINDOW_TTL)
        return window, output


# (window, output limit, until when) by model and server.
_limits: dict[tuple[str, str], tuple[int, int | None, float]] = {}

_WINDOW_FIELDS = ("max_model_len", "context_length", "context_window", "max_context_length")
_OUTPUT_FIELDS = ("max_completion_tokens", "max_output_tokens")


async def _served_limits(cfg: LLMConfig) -> tuple[int | None, int | None]:
    """What an OpenAI-compatible server's /models says of the model's window and output
    limit (vLLM's `max_model_len`, LM Studio's and OpenRouter's fields)."""
    if not cfg.api_base:
        return None, None
    name = cfg.model.split("/", 1)[-1]
    for entry in await wire.served_models(cfg.api_base, cfg.api_key):
        if isinstance(entry, dict) and entry.get("id") in (name, cfg.model):
            provider = entry.get("top_provider")  # OpenRouter puts its limits there
            places = [entry, provider] if isinstance(provider, dict) else [entry]
            return _first_int(places, _WINDOW_FIELDS), _first_int(places, _OUTPUT_FIELDS)
    return None, None


def _first_int(places: list[dict[str, Any]], keys: tuple[str, ...]) -> int | None:
    for place in places:
        for key in keys:
            value = place.get(key)
            if isinstance(value, int) and value > 0:
                return value
    return None


async def _add(piece: str, pieces: list[str], callback: TextCallback | None) -> None:
    """Keep a cleaned piece of the answer, and hand it on; an empty one (all of it held
    back for the next) is nothing to hand on."""
    if piece:
        pieces.append(piece)
        if callback is not None:
            await callback(piece)


def _plain(items: Any) -> list[Any]:
    """litellm's objects as the JSON they stand for; the wire's dicts as they are."""
    return [item.model_dump() if hasattr(item, "model_dump") else item for item in items]


def _usage_dict(usage: Any) -> dict[str, int]:
    return {
        key: int(field_of(usage, key) or 0)
        for key in ("prompt_tokens", "completion_tokens", "total_tokens")
    }
