"""What messages cost in tokens: a real tokenizer where the model's family is known, a
conservative estimate everywhere else.

OpenAI's families are counted with tiktoken's encodings. litellm ships them inside its
package (the files tiktoken would otherwise download); they are read from there without
importing litellm and never fetched from the network. Loading one costs a few hundred
milliseconds, so a conversation is only counted exactly once the estimate says it may not
fit: short conversations never pay for it.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import importlib.util
import json
import logging
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

# Every message carries its role and separators on top of its text.
MESSAGE_OVERHEAD = 6
_ENCODINGS_URL = "https://openaipublic.blob.core.windows.net/encodings/{}.tiktoken"


def estimate(text: str) -> int:
    """Tokens `text` costs at most, near enough: half a token per UTF-8 byte is above what
    common tokenizers spend on English, code or digits, and 1.5 per CJK character."""
    return len(text.encode("utf-8", "surrogatepass")) // 2 + 1


def encoding_name(model: str) -> str | None:
    """tiktoken's encoding for an OpenAI model id (`openai/gpt-4o-mini`); None otherwise."""
    name = model.rsplit("/", 1)[-1].lower()
    if name.startswith(("gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4", "chatgpt")):
        return "o200k_base"
    if name.startswith(("gpt-4", "gpt-3.5")):
        return "cl100k_base"
    return None


def _bundled_encodings() -> Path | None:
    spec = importlib.util.find_spec("litellm")  # the package's folder, without running it
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "litellm_core_utils"
    return folder / "tokenizers"


@functools.cache
def _encoder(name: str) -> Callable[[str], int] | None:
    folder = _bundled_encodings()
    # tiktoken keeps its downloads under the SHA-1 of their URL: without the file it would
    # go to the network, which this never does.
    key = hashlib.sha1(_ENCODINGS_URL.format(name).encode()).hexdigest()
    if folder is None or not (folder / key).is_file():
        logger.info("no offline copy of the %s encoding; estimating token counts", name)
        return None
    import tiktoken

    # Where tiktoken looks for its cached files, for this load only: pointed at the copies
    # it finds there, it never downloads; a cache folder of the user's is left alone after.
    previous = os.environ.get("TIKTOKEN_CACHE_DIR")
    os.environ["TIKTOKEN_CACHE_DIR"] = str(folder)
    try:
        encoding = tiktoken.get_encoding(name)
    except Exception:  # a damaged or changed copy: estimate rather than fail the turn
        logger.warning("could not load the %s encoding; estimating", name, exc_info=True)
        return None
    finally:
        if previous is None:
            os.environ.pop("TIKTOKEN_CACHE_DIR", None)
        else:
            os.environ["TIKTOKEN_CACHE_DIR"] = previous
    return lambda text: len(encoding.encode(text, disallowed_special=()))


class TokenCounter:
    """Counts messages for one model. Each message is counted once per counter (a turn
    makes one), however often the turn re-fits its context."""

    def __init__(self, model: str) -> None:
        self.encoding = encoding_name(model)
        self.exact: Callable[[str], int] | None = None
        self._counted: dict[int, tuple[dict[str, Any], int, bool]] = {}

    async def load_exact(self) -> bool:
        """Load the model's tokenizer (in a thread: it takes a moment); whether there is one."""
        if self.exact is None and self.encoding is not None:
            self.exact = await asyncio.to_thread(_encoder, self.encoding)
        return self.exact is not None

    def text(self, text: str) -> int:
        return self.exact(text) if self.exact is not None else estimate(text)

    def message(self, message: dict[str, Any]) -> int:
        exact = self.exact is not None
        known = self._counted.get(id(message))
        if known is not None and known[0] is message and known[2] == exact:
            return known[1]
        tokens = MESSAGE_OVERHEAD + sum(self.text(part) for part in _texts(message))
        # The message itself is kept with its count, so that its id is not reused meanwhile.
        self._counted[id(message)] = (message, tokens, exact)
        return tokens

    def messages(self, messages: Iterable[dict[str, Any]]) -> int:
        return sum(self.message(message) for message in messages)

    def payload(self, value: Any) -> int:
        """Tokens of any JSON value, such as the tool definitions sent with every call."""
        return self.text(json.dumps(value, ensure_ascii=False, default=str))


def _texts(message: dict[str, Any]) -> Iterable[str]:
    content = message.get("content")
    if isinstance(content, str):
        yield content
    elif isinstance(content, list):  # content parts: text and the rest
        for part in content:
            text = part.get("text") if isinstance(part, dict) else None
            yield text if isinstance(text, str) else json.dumps(part, default=str)
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        yield str(function.get("name") or "")
        yield str(function.get("arguments") or "")
    for key in ("name", "tool_call_id", "reasoning_content"):
        if isinstance(message.get(key), str):
            yield message[key]
