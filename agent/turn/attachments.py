"""Files a client sends inside its messages (images, recordings, documents): read, kept in
the user's folder, and shown to a model that can take them.

A part arrives in OpenAI's shape: `image_url` (a `data:` URL, or an http(s) URL fetched
through the same address guard as `web_fetch`), `input_audio` (base64 and a format) or
`file` (base64 `file_data` and a name). Each file is kept once under `uploads/` in the
user's folder, named by its digest, so that a conversation that brings the same image
with every request stores it once, and the agent's tools can open it.

A model that takes such input gets the file inline; one that does not gets a line naming
the kept file instead. Only the new message's files are refused outright for such a model
(`cannot_take`): the same files in the history of a conversation are not, or every later
message of it would fail too.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import logging
import mimetypes
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.conf import AgentSettings
from agent.tools.guards.network import AddressGuard
from agent.tools.guards.uploads import keep_upload
from agent.tools.tool_errors import GuardError
from agent.turn.refusals import InvalidInput

logger = logging.getLogger(__name__)

# The most one file may hold: OpenAI takes images up to 20 MB.
MAX_FILE_BYTES = 20 * 1024 * 1024
FETCH_SECONDS = 20.0
USER_AGENT = "agentsite (attachment fetch)"
KINDS = {"image_url": "image", "input_audio": "audio", "file": "file"}
PLURALS = {"image": "images", "audio": "audio", "file": "files"}
# Whether the turn's model takes input of a kind (`agent.llm.LLM.accepts`).
Accepts = Callable[[str], bool]
_DATA_URL = re.compile(r"data:(?P<type>[\w.+-]+/[\w.+-]+)?(?:;[^,;]*)*?;base64,(?P<data>.*)", re.S)
_EXTENSIONS = {"image/jpeg": ".jpg", "audio/mpeg": ".mp3", "audio/wav": ".wav"}


@dataclass(frozen=True, slots=True)
class Kept:
    """One file of a message, kept in the user's folder."""

    kind: str  # image, audio or file
    media_type: str
    path: str  # relative to the user's folder
    data: bytes
    # What the part said beyond its file (an image's `detail`, a document's name).
    extra: dict[str, Any]

    def note(self) -> str:
        return f"[{self.kind} attached: {self.path}]"

    def for_model(self) -> dict[str, Any]:
        encoded = base64.b64encode(self.data).decode()
        if self.kind == "image":
            image: dict[str, Any] = {"url": f"data:{self.media_type};base64,{encoded}"}
            image.update(self.extra)
            return {"type": "image_url", "image_url": image}
        if self.kind == "audio":
            audio_format = self.media_type.rsplit("/", 1)[-1].replace("mpeg", "mp3")
            return {"type": "input_audio", "input_audio": {"data": encoded, "format": audio_format}}
        name = self.extra.get("filename") or Path(self.path).name
        data_url = f"data:{self.media_type};base64,{encoded}"
        return {"type": "file", "file": {"filename": name, "file_data": data_url}}


def kind_of(part: dict[str, Any]) -> str | None:
    """The kind of file a content part carries (`image`, `audio`, `file`), or None."""
    return KINDS.get(str(part.get("type")))


def web_address(part: dict[str, Any]) -> str | None:
    """The http(s) URL an image part points at, if it points at one."""
    image = part.get("image_url") if part.get("type") == "image_url" else None
    url = image.get("url") if isinstance(image, dict) else image
    if isinstance(url, str) and url.lower().startswith(("http://", "https://")):
        return url
    return None


def file_parts(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [part for part in content if isinstance(part, dict) and kind_of(part)]


async def keep(
    part: dict[str, Any], *, owner: str, conf: AgentSettings, where: str = "content"
) -> Kept:
    """Read the file of content `part` and keep it in the uploads of `owner`'s folder."""
    kind = kind_of(part)
    if kind == "image":
        image = part["image_url"]
        url = image["url"] if isinstance(image, dict) else image
        media_type, data = await _image(str(url), conf=conf, where=where)
        if not media_type.startswith("image/"):
            raise InvalidInput(f"it is not an image ({media_type[:80]})", field=where)
        extra = {"detail": image["detail"]} if isinstance(image, dict) and "detail" in image else {}
    elif kind == "audio":
        audio = part["input_audio"]
        media_type = f"audio/{audio.get('format') or 'wav'}".replace("/mp3", "/mpeg")
        data, extra = _base64(str(audio.get("data") or ""), where), {}
    else:
        document = part["file"]
        found = _DATA_URL.fullmatch(str(document.get("file_data") or ""))
        if found is None:
            raise InvalidInput("a file part needs its bytes as a base64 data: URL", field=where)
        media_type = found["type"] or "application/octet-stream"
        data = _base64(found["data"], where)
        extra = {"filename": str(document["filename"])} if document.get("filename") else {}
    if len(data) > MAX_FILE_BYTES:
        raise InvalidInput(f"a file may hold at most {MAX_FILE_BYTES} bytes", field=where)
    path = await asyncio.to_thread(_store, owner, data, media_type, conf)
    return Kept(kind=kind or "file", media_type=media_type, path=path, data=data, extra=extra)


def _base64(text: str, where: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidInput("its data is not valid base64", field=where) from None


async def _image(url: str, *, conf: AgentSettings, where: str) -> tuple[str, bytes]:
    found = _DATA_URL.fullmatch(url)
    if found is not None:
        return found["type"] or "image/png", _base64(found["data"], where)
    if not url.lower().startswith(("http://", "https://")):
        raise InvalidInput("an image is a data: URL or an http(s) URL", field=where)
    # The web tools' client and guard: a client's URL reaches no address the agent's own
    # fetches may not.
    from agent.tools.webhttp import download, failure_reason, guarded_client

    guard = AddressGuard(allow_private=conf.web_allow_private)
    try:
        async with guarded_client(guard, timeout=FETCH_SECONDS, user_agent=USER_AGENT) as client:
            got = await download(client, url, max_bytes=MAX_FILE_BYTES, binary=True)
    except Exception as exc:
        reason = failure_reason(exc)
        message = f"the image at {url[:200]} could not be fetched: {reason}"
        raise InvalidInput(message, field=where) from None
    if got.status != 200 or got.cut:
        problem = "is larger than 20 MB" if got.cut else f"answered {got.status} {got.reason}"
        raise InvalidInput(f"the image at {url[:200]} {problem}", field=where)
    return got.content_type or "image/png", got.body


def _store(owner: str, data: bytes, media_type: str, conf: AgentSettings) -> str:
    digest = hashlib.sha256(data).hexdigest()[:24]
    extension = _EXTENSIONS.get(media_type) or mimetypes.guess_extension(media_type) or ".bin"
    try:
        return keep_upload(
            conf.workspace, owner, f"{digest}{extension}", data, sandbox_uid=conf.sandbox_uid
        )
    except (GuardError, OSError) as exc:
        logger.warning("a file for %s could not be kept: %s", owner, exc)
        raise InvalidInput(f"the file could not be kept in your folder: {exc}") from None


def user_content(text: str, files: tuple[Kept, ...]) -> str | list[dict[str, Any]]:
    """The new message as the model gets it: its text, and its files inline."""
    if not files:
        return text
    return [{"type": "text", "text": text}, *(kept.for_model() for kept in files)]


def stored_text(text: str, files: tuple[Kept, ...]) -> str:
    """The new message as it is stored and shown: its text, and a line per kept file."""
    return "\n".join([text, *(kept.note() for kept in files)]) if files else text
