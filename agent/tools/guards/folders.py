"""Each user's own folder in the workspace, `<workspace>/users/<username>/`, and each
team's, `<workspace>/teams/<slug>/`, where the team's chats work.

The folder's name is the username, escaped so that no account can name a folder outside
`users/` or another account's: Django lets usernames be `.`, `..` and every letter of
every script, and a row can be saved with anything at all. Letters, digits and `_@+-.`
stay as they are (a leading dot does not); every other character, `%` itself included,
becomes `%XX` for each of its UTF-8 bytes. That mapping is one-to-one, so two names that
differ in any way get two folders. A name too long for a file system keeps its start and
ends in `~` and a digest of the whole name (`~` is always escaped, so such a name is no
other's either).

Names differ by case here as usernames do: Django's own user model tells `Ada` from `ada`,
and so do the file systems of the servers this runs on (not macOS's default).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import stat
from datetime import UTC, datetime
from pathlib import Path

from agent.tools.tool_errors import GuardError

logger = logging.getLogger(__name__)

USERS = "users"
TEAMS = "teams"
# Turns of no account (sessions made before accounts owned everything, or by scripts): a
# folder that no escaped username can be, since escaping never leaves a leading dot.
OWNERLESS = ".ownerless"
# Where the folder of a deleted account goes, so that a new account of the same name
# starts empty and nothing of the old one is lost.
RETIRED = ".deleted"
# Bytes a folder name may take; most file systems allow 255.
MAX_NAME_BYTES = 200
_KEPT = re.compile(r"[A-Za-z0-9_@+.\-]")


def folder_name(username: str) -> str:
    """The escaped, one-to-one folder name of `username`."""
    if not username:
        raise ValueError("an account without a username has no folder")
    escaped = "".join(
        char
        if _KEPT.fullmatch(char) and not (index == 0 and char == ".")
        else "".join(f"%{byte:02X}" for byte in char.encode("utf-8", "surrogatepass"))
        for index, char in enumerate(username)
    )
    if len(escaped) <= MAX_NAME_BYTES:
        return escaped
    digest = hashlib.sha256(username.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{escaped[: MAX_NAME_BYTES - 17]}~{digest}"


def user_folder(workspace: Path, username: str | None) -> Path:
    """Where the folder of the account `username` is (None: of turns that belong to no
    account), whether or not it exists yet."""
    name = folder_name(username) if username is not None else OWNERLESS
    return workspace.resolve() / USERS / name


def team_folder(workspace: Path, slug: str) -> Path:
    """Where the folder of the team `slug` is, whether or not it exists yet."""
    return workspace.resolve() / TEAMS / folder_name(slug)


def make_user_folder(
    workspace: Path, username: str | None, *, sandbox_uid: int | None = None
) -> Path:
    """`user_folder`, checked and made if it is new (`make_folder`)."""
    return make_folder(user_folder(workspace, username), sandbox_uid=sandbox_uid)


def make_folder(folder: Path, *, sandbox_uid: int | None = None) -> Path:
    """A user's or a team's folder, checked and made if it is new (open to the server's
    account only). With `sandbox_uid`, the account a site running as root runs commands
    as, the folder is that account's (handed over once if it is not yet, `hand_over`), and
    its parent (`users/`, `teams/`) lets it pass through, not list.

    Raises GuardError when the folder, or its parent, is a link that leads elsewhere
    (made by hand, or by an agent of an earlier version, which wrote in the workspace's
    root): a turn must not work in a folder that is not where it looks."""
    folder = _checked(folder)
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    if sandbox_uid is not None:
        mode = folder.parent.stat().st_mode
        if not mode & stat.S_IXOTH:
            folder.parent.chmod(stat.S_IMODE(mode) | stat.S_IXOTH)
        hand_over(folder, sandbox_uid)
    return _checked(folder)


def _checked(folder: Path) -> Path:
    if folder.parent.resolve() != folder.parent or folder.resolve() != folder:
        raise GuardError(
            f"the folder {folder} leads elsewhere through a link; "
            "an administrator must replace the link with a folder"
        )
    return folder


def rename_user_folder(workspace: Path, old: str, new: str) -> Path | None:
    """Give the folder of the account once called `old` its new name `new`; where it went,
    or None when there was nothing to move. A folder already there under the new name
    (a deleted account's that was not retired, or one made by hand) is retired first."""
    source = _checked(user_folder(workspace, old))
    target = _checked(user_folder(workspace, new))
    if source == target or not source.exists():
        return None
    if target.exists():
        retire_user_folder(workspace, new, reason="in the way of a renamed account")
    source.rename(target)
    logger.info("the folder %s is now %s", source, target)
    return target


def retire_user_folder(workspace: Path, username: str, *, reason: str = "deleted") -> Path | None:
    """Move the account's folder aside, under `users/.deleted/`, dated; where it went."""
    return _retire(_checked(user_folder(workspace, username)), reason)


def retire_team_folder(workspace: Path, slug: str) -> Path | None:
    """Move a deleted team's folder aside, under `teams/.deleted/`, dated, so that a new
    team of the same slug starts empty; where it went."""
    return _retire(_checked(team_folder(workspace, slug)), "its team deleted")


def _retire(source: Path, reason: str) -> Path | None:
    if not source.exists():
        return None
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    target = source.parent / RETIRED / f"{source.name}~{stamp}"
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    shutil.move(source, target)
    logger.info("the folder %s (%s) is kept as %s", source, reason, target)
    return target


def hand_over(folder: Path, uid: int) -> int:
    """Make `folder` and everything in it the account `uid`'s (group `uid`), when the
    folder itself is not yet: a site running as root runs `exec` as that account, which
    must be able to change what the site or an older version made there as root. How many
    entries changed.

    Walked by descriptors without following a link anywhere (a link is changed itself),
    never into another file system; a file with other names keeps its owner, since they may
    be outside the folder."""
    top = os.stat(folder, follow_symlinks=False)
    if top.st_uid == uid or not stat.S_ISDIR(top.st_mode):
        return 0
    changed = 0
    for _, dirs, files, dir_fd in os.fwalk(folder, topdown=True, follow_symlinks=False):
        for name in [*dirs, *files]:
            try:
                info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                continue
            if info.st_dev != top.st_dev:
                dirs[:] = [d for d in dirs if d != name]
                continue
            if info.st_uid == uid or (not stat.S_ISDIR(info.st_mode) and info.st_nlink > 1):
                continue
            os.chown(name, uid, uid, dir_fd=dir_fd, follow_symlinks=False)
            changed += 1
    # The folder itself last: one walk cut short is walked again the next time.
    os.chown(folder, uid, uid, follow_symlinks=False)
    logger.info("%s now belongs to uid %d (%d entries in it changed)", folder, uid, changed)
    return changed + 1
