"""Files a user uploads, kept in `uploads/` of their own folder where their agent's file
tools and `exec` find them.

The agent can plant links and other odd things in its folder with `exec`, so nothing here
goes by path alone: the folder, then `uploads/` in it, are opened without following a link
at their last step (the folder's own path is checked first by `make_user_folder`), and each
file is created in that open directory with `O_CREAT | O_EXCL | O_NOFOLLOW`, which neither
follows a link at the name nor touches a file already there.
"""

from __future__ import annotations

import logging
import os
import secrets
import stat
import unicodedata
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from agent import openat
from agent.tools.guards.folders import make_user_folder
from agent.tools.tool_errors import GuardError

logger = logging.getLogger(__name__)

UPLOADS = "uploads"
# Bytes a name may take before a suffix such as " (12)" is added; file systems allow 255.
MAX_NAME_BYTES = 150
# Extensions longer than this are part of the name when a long one is shortened.
_MAX_EXTENSION = 16
# Numbered names tried before one with a random part is taken instead.
_NUMBERED = 1000
# Listed at most, newest first.
MAX_LISTED = 500


class UploadsUnusable(GuardError):
    """The user's folder, or `uploads/` in it, is not a plain folder (a link, a file)."""


class UploadTooLarge(Exception):
    """More bytes came than the cap allows; nothing was kept."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the file is larger than {limit} bytes")
        self.limit = limit


@dataclass(frozen=True, slots=True)
class StoredUpload:
    name: str
    size: int
    modified: datetime

    @property
    def path(self) -> str:
        """Relative to the user's folder: what the agent's file tools take."""
        return f"{UPLOADS}/{self.name}"


def safe_name(raw: str) -> str:
    """`raw` as a plain name in one folder: its last path part only, without control or
    format characters (a right-to-left mark would disguise an extension), without a leading
    dot (no `.bashrc`, no `..`), at most MAX_NAME_BYTES of UTF-8; a random name when nothing
    is left."""
    name = raw.replace("\\", "/").rsplit("/", 1)[-1]
    name = unicodedata.normalize("NFC", name)
    name = "".join(char for char in name if not unicodedata.category(char).startswith("C"))
    name = name.strip().lstrip(".").strip()
    name = _shortened(name)
    return name or f"upload-{secrets.token_hex(4)}"


def _shortened(name: str) -> str:
    if len(name.encode()) <= MAX_NAME_BYTES:
        return name
    stem, dot, extension = name.rpartition(".")
    if not dot or not stem or len(extension.encode()) > _MAX_EXTENSION:
        stem, extension = name, ""
    suffix = f".{extension}" if extension else ""
    room = MAX_NAME_BYTES - len(suffix.encode())
    kept = stem.encode()[:room].decode("utf-8", "ignore").rstrip()
    return f"{kept}{suffix}"


def _candidates(name: str) -> Iterator[str]:
    """`name`, then `name (1)`, `name (2)`… before the extension, then random ones."""
    stem, dot, extension = name.rpartition(".")
    if not dot or not stem:
        stem, extension = name, ""
    suffix = f".{extension}" if extension else ""
    yield name
    for number in range(1, _NUMBERED):
        yield f"{stem} ({number}){suffix}"
    while True:
        yield f"{stem}-{secrets.token_hex(6)}{suffix}"


@contextmanager
def _uploads_dir(
    workspace: Path, username: str, *, create: bool, sandbox_uid: int | None
) -> Iterator[int | None]:
    """An open descriptor of the user's `uploads/` (None when there is none and `create` is
    off); raises UploadsUnusable when it, or the folder, is not a plain folder. The folder
    is `sandbox_uid`'s, when given (`make_user_folder`), and so is what is made in it."""
    try:
        folder = make_user_folder(workspace, username, sandbox_uid=sandbox_uid)
    except GuardError as exc:
        raise UploadsUnusable(str(exc)) from exc
    users_fd = _open_dir(folder.parent, None)
    try:
        folder_fd = _open_dir(folder.name, users_fd)
    finally:
        os.close(users_fd)
    try:
        if create:
            with suppress(FileExistsError):
                os.mkdir(UPLOADS, 0o700, dir_fd=folder_fd)
        try:
            uploads_fd = _open_dir(UPLOADS, folder_fd)
        except FileNotFoundError:
            uploads_fd = None
        if create and uploads_fd is not None:
            openat.adopt(uploads_fd, folder_fd)
    finally:
        os.close(folder_fd)
    try:
        yield uploads_fd
    finally:
        if uploads_fd is not None:
            os.close(uploads_fd)


def _open_dir(name: str | Path, parent_fd: int | None) -> int:
    """The folder `name` (in the open folder `parent_fd`), not through a link at its name."""
    try:
        return openat.open_dir(name, parent_fd)
    except (openat.LinkFound, NotADirectoryError) as exc:
        logger.warning("%s is not a plain folder; uploads refused", name)
        raise UploadsUnusable(f"{name} is not a plain folder") from exc


def save_upload(
    workspace: Path,
    username: str,
    name: str,
    chunks: Iterable[bytes],
    *,
    limit: int,
    sandbox_uid: int | None = None,
) -> StoredUpload:
    """Write `chunks` as a new file in the user's `uploads/`, under `safe_name(name)` or,
    when that is taken (by anything, a link too), the first free numbered form of it.
    Raises UploadTooLarge past `limit` bytes, keeping nothing. `sandbox_uid`: see
    `make_user_folder`."""
    wanted = safe_name(name)
    with _uploads_dir(workspace, username, create=True, sandbox_uid=sandbox_uid) as directory:
        assert directory is not None
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
        for candidate in _candidates(wanted):
            try:
                fd = openat.open_in(directory, candidate, flags, 0o600)
            except FileExistsError:
                continue
            break
        try:
            size = _write(fd, chunks, limit)
        except BaseException:
            os.unlink(candidate, dir_fd=directory)
            raise
        modified = os.stat(candidate, dir_fd=directory, follow_symlinks=False).st_mtime
    logger.info("%s uploaded %s (%d bytes)", username, candidate, size)
    return StoredUpload(candidate, size, datetime.fromtimestamp(modified, UTC))


def keep_upload(
    workspace: Path, username: str, name: str, data: bytes, *, sandbox_uid: int | None = None
) -> str:
    """Keep `data` in the user's `uploads/` as `name` (a name made of its digest: the same
    bytes kept again are the file already there); its path in the folder."""
    with _uploads_dir(workspace, username, create=True, sandbox_uid=sandbox_uid) as directory:
        assert directory is not None
        try:
            fd = openat.open_in(directory, name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return f"{UPLOADS}/{name}"
        try:
            _write(fd, [data], len(data))
            if sandbox_uid is not None:
                os.chown(name, sandbox_uid, sandbox_uid, dir_fd=directory, follow_symlinks=False)
        except BaseException:
            os.unlink(name, dir_fd=directory)
            raise
    return f"{UPLOADS}/{name}"


def _write(fd: int, chunks: Iterable[bytes], limit: int) -> int:
    size = 0
    with os.fdopen(fd, "wb") as out:
        for chunk in chunks:
            size += len(chunk)
            if size > limit:
                raise UploadTooLarge(limit)
            out.write(chunk)
    return size


def list_uploads(
    workspace: Path, username: str, *, sandbox_uid: int | None = None
) -> list[StoredUpload]:
    """The plain files in the user's `uploads/`, newest first (at most MAX_LISTED); links
    and folders the agent made there are left out. `sandbox_uid`: see `make_user_folder`."""
    with _uploads_dir(workspace, username, create=False, sandbox_uid=sandbox_uid) as directory:
        if directory is None:
            return []
        found = []
        with os.scandir(directory) as entries:
            for entry in entries:
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISREG(info.st_mode):
                    modified = datetime.fromtimestamp(info.st_mtime, UTC)
                    found.append(StoredUpload(entry.name, info.st_size, modified))
    found.sort(key=lambda upload: (upload.modified, upload.name), reverse=True)
    return found[:MAX_LISTED]
