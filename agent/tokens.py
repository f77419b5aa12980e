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


def _bundled_encodings() -> Path | None:
    spec = importlib.util.find_spec("litellm")  # the package's folder, without running it
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "litellm_core_utils"
    return folder / "tokenizers"


# tiktoken takes the folder of its cached files from the environment only. It is pointed at
# litellm's copies once, as this module is imported at start-up and before any thread
# counts (litellm's own import sets the same), so that it never downloads.
BUNDLED_ENCODINGS = _bundled_encodings()
if BUNDLED_ENCODINGS is not None:
    os.environ["TIKTOKEN_CACHE_DIR"] = str(BUNDLED_ENCODINGS)


@functools.cache
def _encoder(model: str) -> Callable[[str], int] | None:
    """The exact count for `model` (`openai/gpt-4o-mini`): tiktoken's encoding for the
    model's name, where tiktoken knows the name and the encoding is at hand offline."""
    import tiktoken

    name = model.rsplit("/", 1)[-1].lower()
    try:
        encoding_name = tiktoken.encoding_name_for_model(name)
    except KeyError:
        return None  # not one of OpenAI's models
    # tiktoken keeps its downloads under the SHA-1 of their URL: without the file it would
    # go to the network, which this never does.
    key = hashlib.sha1(_ENCODINGS_URL.format(encoding_name).encode()).hexdigest()
    if BUNDLED_ENCODINGS is None or not (BUNDLED_ENCODINGS / key).is_file():
        logger.info("no offline copy of the %s encoding; estimating token counts", encoding_name)
        return None
    try:
        encoding = tiktoken.encoding_for_model(name)
    except Exception:  # a damaged or changed copy: estimate rather than fail the turn
        logger.warning("could not load the %s encoding; estimating", encoding_name, exc_info=True)
        return None
    return lambda text: len(encoding.encode(text, disallowed_special=()))


# Parts of a message that carry a file (an image, a recording, a document) and what one is
# reckoned to cost: a detailed image of OpenAI's costs up to about 1,100 tokens, and the
# encoded bytes, counted as text, would fill any window.
FILE_PARTS = frozenset({"image_url", "input_audio", "file"})
FILE_PART_TOKENS = 1100


class TokenCounter:
    """Counts messages for one model. Each message is counted once per counter (a turn
    makes one), however often the turn re-fits its context."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.exact: Callable[[str], int] | None = None
        self._looked = False
        self._counted: dict[int, tuple[dict[str, Any], int, bool]] = {}

    async def load_exact(self) -> bool:
        """Load the model's tokenizer (in a thread: it takes a moment); whether there is one."""
        if not self._looked:
            self.exact = await asyncio.to_thread(_encoder, self.model)
            self._looked = True
        return self.exact is not None

    def text(self, text: str) -> int:
        return self.exact(text) if self.exact is not None else estimate(text)

    def message(self, message: dict[str, Any]) -> int:
        exact = self.exact is not None
        known = self._counted.get(id(message))
        if known is not None and known[0] is message and known[2] == exact:
            return known[1]
        tokens = MESSAGE_OVERHEAD + sum(self.text(part) for part in _texts(message))
        tokens += FILE_PART_TOKENS * _file_parts(message)
        # The message itself is kept with its count, so that its id is not reused meanwhile.
        self._counted[id(message)] = (message, tokens, exact)
        return tokens

    def messages(self, messages: Iterable[dict[str, Any]]) -> int:
        return sum(self.message(message) for message in messages)

    def payload(self, value: Any) -> int:
        """Tokens of any JSON value, such as the tool definitions sent with every call."""
        return self.text(json.dumps(value, ensure_ascii=False, default=str))


def _file_parts(message: dict[str, Any]) -> int:
    content = message.get("content")
    if not isinstance(content, list):
        return 0
    return sum(1 for part in content if isinstance(part, dict) and part.get("type") in FILE_PARTS)


def _texts(message: dict[str, Any]) -> Iterable[str]:
    content = message.get("content")
    if isinstance(content, str):
        yield content
    elif isinstance(content, list):  # content parts: text and the rest
        for part in content:
            if not isinstance(part, dict) or part.get("type") in FILE_PARTS:
                continue  # counted as a whole: their bytes are no text the model reads
            text = part.get("text")
            yield text if isinstance(text, str) else json.dumps(part, default=str)
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        yield str(function.get("name") or "")
        yield str(function.get("arguments") or "")
    for key in ("name", "tool_call_id", "reasoning_content"):
        if isinstance(message.get(key), str):
            yield message[key]
