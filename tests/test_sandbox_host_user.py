"""A site running as root runs `exec` as an account of the sandbox's own, never as root:
what commands make is that account's on the host, the file tools and commands change each
other's files, folders an older version made as root are handed over once, and one user's
fork bomb leaves another user's commands room. Real bubblewrap, as root."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import stat
from pathlib import Path

import environ
import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from agent.checks import exec_problems
from agent.conf import SETTINGS, read_settings
from agent.tools import Limits, ToolContext, ToolRegistry, build_registry
from agent.tools import shell as shell_module
from agent.tools.guards import Workspace
from agent.tools.guards.folders import make_user_folder, user_folder
from agent.tools.guards.uploads import save_upload
from agent.tools.sandbox import HOST_UID, find_sandbox
from agent.tools.shell import ExecTool
from agent.turn import SessionRef, run_turn
from tests.conftest import needs
from tests.llm_server import ScriptedLLM
from tests.test_tools_exec import host_processes, sleeper

pytestmark = needs(os.geteuid() != 0, "as an ordinary user, commands run as that user, as before")
SYSTEM_PYTHON = Path("/usr/bin/python3")


def owner(path: Path) -> tuple[int, int]:
    info = os.stat(path, follow_symlinks=False)
    return info.st_uid, info.st_gid


SANDBOX = (HOST_UID, HOST_UID)
ROOT = (0, 0)


def turn_of(folder: Path) -> ToolContext:
    """The context of a turn whose user works in `folder`."""
    return ToolContext(session_key="web:x", channel="web", workspace=Workspace(folder))


@pytest.fixture
def tools(workspace: Path) -> ToolRegistry:
    return build_registry(workspace=workspace, exec_timeout=10, exec_env={})


async def test_what_exec_makes_is_the_sandbox_accounts_on_the_host(
    tools: ToolRegistry, workspace: Path
) -> None:
    result = await tools.execute(
        "exec", {"command": "id -u; echo hi > made.txt; mkdir dir; touch dir/inner"}
    )
    assert result.startswith("1000\n"), result  # the sandbox's own user, inside
    for made in (workspace, workspace / "made.txt", workspace / "dir", workspace / "dir/inner"):
        assert owner(made) == SANDBOX, made


async def test_the_file_tools_and_exec_change_each_others_files(
    tools: ToolRegistry, workspace: Path
) -> None:
    written = await tools.execute("write_file", {"path": "notes/a.txt", "content": "one\n"})
    assert not written.startswith("Error"), written
    changed = await tools.execute("exec", {"command": "echo two >> notes/a.txt && echo b > b.txt"})
    assert changed.endswith("Exit code: 0"), changed
    assert (workspace / "notes/a.txt").read_text() == "one\ntwo\n"
    edited = await tools.execute("edit_file", {"path": "b.txt", "old_text": "b", "new_text": "B"})
    assert not edited.startswith("Error"), edited
    written = await tools.execute("write_file", {"path": "new/deep/c.txt", "content": "c\n"})
    assert not written.startswith("Error"), written
    for made in ("notes", "notes/a.txt", "b.txt", "new", "new/deep", "new/deep/c.txt"):
        assert owner(workspace / made) == SANDBOX, made
    changed = await tools.execute("exec", {"command": "echo C >> new/deep/c.txt; rm b.txt"})
    assert changed.endswith("Exit code: 0"), changed
    assert (workspace / "new/deep/c.txt").read_text() == "c\nC\n"


async def test_a_folder_made_as_root_is_handed_over_once_without_following_links(
    tools: ToolRegistry, workspace: Path, outside: Path
) -> None:
    """What an older version (its sandbox mapped onto root) or the site left as root's."""
    (workspace / "sub").mkdir()
    (workspace / "sub/old.txt").write_text("old\n")
    (workspace / "to-outside").symlink_to(outside)
    (workspace / "secret-link.txt").symlink_to(outside / "secret.txt")
    shared = outside / "shared.txt"
    shared.write_text("shared\n")
    os.link(shared, workspace / "shared.txt")  # another name of a file outside
    result = await tools.execute("exec", {"command": "echo new >> sub/old.txt; id -u"})
    assert result.endswith("1000\nExit code: 0"), result
    for entry in ("", "sub", "sub/old.txt", "to-outside", "secret-link.txt"):
        assert owner(workspace / entry) == SANDBOX, entry
    for untouched in (outside, outside / "secret.txt", shared):
        assert owner(untouched) == ROOT, untouched
    # Once: what root makes afterwards outside the file tools is left as it is.
    (workspace / "later.txt").write_text("later\n")
    await tools.execute("exec", {"command": "true"})
    assert owner(workspace / "later.txt") == ROOT


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("agent_settings")
async def test_a_users_folder_is_the_sandbox_accounts_from_their_first_turn(
    llm: ScriptedLLM, workspace: Path
) -> None:
    user = await User.objects.acreate_user("bob", password="pw")
    llm.tool_call("write_file", {"path": "notes/first.txt", "content": "first\n"}).reply("Kept.")
    await run_turn(SessionRef("web:first", user), "keep a note", channel="web")
    folder = user_folder(workspace, "bob")
    for made in ("", "notes", "notes/first.txt"):
        assert owner(folder / made) == SANDBOX, made
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE(folder.parent.stat().st_mode) & 0o001  # users/: passable, no more


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("agent_settings")
async def test_an_upload_is_the_sandbox_accounts_and_the_agents_commands_change_it(
    llm: ScriptedLLM, workspace: Path
) -> None:
    user = await User.objects.acreate_user("ada", password="pw")
    client = APIClient()
    client.force_authenticate(user)
    sent = SimpleUploadedFile("data.txt", b"1\n")
    response = await sync_to_async(client.post)("/api/uploads", {"file": sent}, format="multipart")
    assert response.status_code == 201, response.content
    folder = user_folder(workspace, "ada")
    for made in ("", "uploads", "uploads/data.txt"):
        assert owner(folder / made) == SANDBOX, made
    llm.tool_call("exec", {"command": "echo 2 >> uploads/data.txt"}).reply("Added.")
    await run_turn(SessionRef("web:add", user), "add a line", channel="web")
    assert (folder / "uploads/data.txt").read_text() == "1\n2\n"


async def test_uploads_made_while_the_folder_was_roots_are_handed_over_with_it(
    tools: ToolRegistry, workspace: Path
) -> None:
    folder = make_user_folder(workspace, "ada")
    upload = save_upload(workspace, "ada", "first.txt", [b"1\n"], limit=100)
    result = await tools.execute("exec", {"command": f"echo 2 >> {upload.path}"}, turn_of(folder))
    assert result.endswith("Exit code: 0"), result
    later = save_upload(workspace, "ada", "later.txt", [b"3\n"], limit=100)
    for made in ("", "uploads", upload.path, later.path):
        assert owner(folder / made) == SANDBOX, made
    assert stat.S_IMODE(os.stat(folder / later.path).st_mode) == 0o600
    result = await tools.execute("exec", {"command": f"cat {later.path}"}, turn_of(folder))
    assert result.startswith("3\n"), result
    assert (folder / upload.path).read_text() == "1\n2\n"


async def test_the_sandbox_account_is_a_setting(workspace: Path) -> None:
    tool = ExecTool(Workspace(workspace), timeout=10, limits=Limits(host_uid=1_900_000_123))
    result = await tool.execute(ToolContext.detached(), command="touch x")
    assert result.endswith("Exit code: 0"), result
    assert owner(workspace / "x") == (1_900_000_123, 1_900_000_123)
    declared = next(spec for spec in SETTINGS if spec.name == "AGENT_EXEC_UID")
    assert declared.default == HOST_UID
    env = environ.Env()
    for refused in ("0", "-1", str(2**32 - 1)):
        env.ENVIRON = {"AGENT_EXEC_UID": refused}
        with pytest.raises(ValueError, match="AGENT_EXEC_UID"):
            read_settings(env)


async def test_exec_refuses_plainly_where_its_account_cannot_reach_the_workspace(
    tmp_path: Path, settings
) -> None:
    closed = tmp_path / "closed"
    (closed / "workspace").mkdir(parents=True)
    closed.chmod(0o700)
    tool = ExecTool(Workspace(closed / "workspace"), timeout=10)
    registry = ToolRegistry()
    registry.register(tool)
    result = await registry.execute("exec", {"command": "touch ran.txt"})
    assert result.startswith(f"Error: exec cannot run here: its sandbox runs as uid {HOST_UID}")
    assert f"chmod o+x {closed}" in result
    assert not (closed / "workspace/ran.txt").exists()
    settings.AGENT_WORKSPACE = closed / "workspace"
    assert [f"chmod o+x {closed}" in problem for problem in exec_problems()] == [True]
    closed.chmod(0o711)
    assert exec_problems() == []


@needs(not SYSTEM_PYTHON.exists(), "the bomb is the system's python3")
async def test_one_users_fork_bomb_leaves_another_users_commands_room(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every user's commands run as one account on the host, but the kernel counts a
    process limit in each sandbox's own user namespace: without cgroups to help, a bomb
    that holds all of its own processes takes none of another sandbox's."""
    without_cgroups = dataclasses.replace(find_sandbox(), cgroups=None)
    monkeypatch.setattr(shell_module, "find_sandbox", lambda **_: without_cgroups)
    limits = Limits(max_processes=32)
    bomb_folder, other_folder = (
        make_user_folder(workspace, "bomb"),
        make_user_folder(workspace, "other"),
    )
    bomber = ExecTool(Workspace(bomb_folder), timeout=20, limits=limits, env={})
    other = ExecTool(Workspace(other_folder), timeout=20, limits=limits, env={})
    held = sleeper(6)
    # A shell gives up at its first refused fork; this bomb keeps what it got.
    hold = (
        "import os, time\n"
        "for _ in range(200):\n"
        "    try:\n"
        "        if os.fork() == 0:\n"
        f"            os.execvp('sleep', {held.split()!r})\n"
        "    except OSError:\n"
        "        pass\n"
        "time.sleep(8)\n"
    )
    (bomb_folder / "bomb.py").write_text(hold)
    bomb = asyncio.create_task(bomber.execute(turn_of(bomb_folder), command="python3 bomb.py"))
    try:
        while len(host_processes(held, whole=True)) < 25:
            assert not bomb.done(), await bomb
            await asyncio.sleep(0.05)
        peak = len(host_processes(held, whole=True))
        started = await other.execute(
            turn_of(other_folder),
            command="for i in $(seq 24); do sleep 1 & done; wait; echo all started",
        )
        peak = max(peak, len(host_processes(held, whole=True)))
    finally:
        bomb.cancel()
        with pytest.raises(asyncio.CancelledError):
            await bomb
    assert started == "all started\nExit code: 0", started
    assert peak <= 32, peak  # the bomb itself was held to its own limit
