"""What the file tools make of the paths a model writes, and of what the agent left in its
folder: a link is listed as a link and never looked through (whether what it points at
exists is nobody's business of the listing), `~name` is another account's home and outside
the workspace, and no path at all makes a tool fail "unexpectedly"."""

from __future__ import annotations

import dataclasses
import os
import socket
from pathlib import Path
from typing import Any

import pytest

from agent.tools import ToolContext, ToolRegistry, Workspace, build_registry
from agent.tools.guards.folders import make_user_folder
from agent.tools.listing import MAX_HELD, Entry, walk

LISTINGS: list[tuple[str, dict[str, Any]]] = [
    ("list_dir", {}),
    ("list_dir", {"recursive": True}),
    ("glob", {"pattern": "*"}),
    ("glob", {"pattern": "**/*"}),
    ("glob", {"pattern": "o_*"}),
    ("glob", {"pattern": "o_*/*"}),
]


def as_user(folder: Path) -> ToolContext:
    return dataclasses.replace(ToolContext.detached("web"), workspace=Workspace(folder))


def world(base: Path, *, targets_exist: bool) -> tuple[ToolRegistry, Path]:
    """A workspace whose user `alice` made links to another user's folder, to folders and
    files of the host, and to the server's data: all there, or all missing."""
    workspace = base / "workspace"
    alice = make_user_folder(workspace, "alice")
    host = base.parent / "host"
    if targets_exist:
        make_user_folder(workspace, "bob")
        (workspace / "users" / "bob" / "AGENTS.md").write_text("bob's")
        (host / "data").mkdir(parents=True, exist_ok=True)
        (host / "secret.txt").write_text("secret")
    links = {
        "o_bob": "../bob",
        "o_bob_abs": str(workspace / "users" / "bob"),
        "o_data": str(host / "data"),
        "o_secret": str(host / "secret.txt"),
        "o_workspace": "../..",
    }
    for name, target in links.items():
        (alice / name).symlink_to(target)
    (alice / "mine").mkdir()
    (alice / "mine" / "o_note.txt").write_text("mine")
    return build_registry(workspace=workspace, exec_timeout=1), alice


@pytest.mark.parametrize(("tool", "args"), LISTINGS)
async def test_a_link_lists_the_same_whether_its_target_exists_or_not(
    tmp_path: Path, tool: str, args: dict[str, Any]
) -> None:
    there, alice = world(tmp_path / "there", targets_exist=True)
    missing, zed = world(tmp_path / "missing", targets_exist=False)

    seen = await there.execute(tool, args, as_user(alice))
    assert seen == await missing.execute(tool, args, as_user(zed))
    assert "o_bob@" in seen or "No files match" in seen
    assert "o_bob/" not in seen and "AGENTS" not in seen and "secret.txt" not in seen


async def test_links_are_marked_and_never_walked_into(tmp_path: Path) -> None:
    tools, alice = world(tmp_path / "there", targets_exist=True)
    os.mkfifo(alice / "pipe")
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(alice / "sock"))
        listed = await tools.execute("list_dir", {"recursive": True}, as_user(alice))
        globbed = await tools.execute("glob", {"pattern": "**/*"}, as_user(alice))
    expected = [
        "mine/",
        "mine/o_note.txt",
        "o_bob@",
        "o_bob_abs@",
        "o_data@",
        "o_secret@",
        "o_workspace@",
        "pipe|",
        "sock=",
    ]
    assert listed.splitlines() == expected
    assert globbed.splitlines() == expected
    for name in ("o_bob", "o_data", "o_workspace"):
        refused = await tools.execute("list_dir", {"path": name}, as_user(alice))
        assert "is outside the workspace" in refused


async def test_the_tools_tell_the_model_the_notation(ws: Path) -> None:
    tools = build_registry(workspace=ws, exec_timeout=1)
    for name in ("list_dir", "glob"):
        description = tools.get(name).description  # type: ignore[union-attr]
        assert "links with '@' (not followed" in description
        assert "Folders end with '/'" in description


@pytest.mark.parametrize("restrict", [True, False], ids=["fenced", "unfenced"])
async def test_a_name_that_is_no_utf8_and_a_line_break_are_listed_as_escapes(
    ws: Path, restrict: bool
) -> None:
    (ws / "d").mkdir()
    for raw in (b"caf\xe9.txt", b"two\nlines", b"tab\there"):
        os.close(os.open(os.fsencode(ws / "d") + b"/" + raw, os.O_WRONLY | os.O_CREAT))
    tools = build_registry(workspace=ws, restrict_to_workspace=restrict, exec_timeout=1)
    listed = await tools.execute("list_dir", {"path": "d"})
    assert listed.splitlines() == ["caf\\udce9.txt", "tab\\there", "two\\nlines"]
    assert await tools.execute("glob", {"pattern": "d/*"}) == (
        "d/caf\\udce9.txt\nd/tab\\there\nd/two\\nlines"
    )
    listed.encode("utf-8")  # what the model gets can be sent and stored


# --- ~ ------------------------------------------------------------------------------------

FILE_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("read_file", {}),
    ("write_file", {"content": "x"}),
    ("append_file", {"content": "x"}),
    ("edit_file", {"old_text": "a", "new_text": "b"}),
    ("list_dir", {}),
    ("glob", {"pattern": "*"}),
]


@pytest.mark.parametrize(("tool", "extra"), FILE_CALLS)
@pytest.mark.parametrize("path", ["~bob/x", "~root/x", "~no-such-account-7f2c/x", "~bob"])
async def test_another_accounts_home_is_outside_the_workspace(
    ws: Path, tool: str, extra: dict[str, Any], path: str
) -> None:
    tools = build_registry(workspace=ws, exec_timeout=1)
    result = await tools.execute(tool, {"path": path, **extra})
    account = path.split("/")[0]
    assert result == (
        f"Error: path '{path}' is outside the workspace ({ws.resolve()}): '{account}' names "
        "the home folder of an account of the server; only paths inside the workspace are "
        f"allowed (a file of that name in the workspace is './{path}')"
    )


async def test_the_servers_own_home_is_as_it_was(ws: Path) -> None:
    tools = build_registry(workspace=ws, exec_timeout=1)
    for path in ("~", "~/x", "~/"):
        result = await tools.execute("read_file", {"path": path})
        assert result.startswith(f"Error: path '{path}' is outside the workspace"), result
    unfenced = build_registry(workspace=ws, restrict_to_workspace=False, exec_timeout=1)
    home = Path("~").expanduser()
    assert await unfenced.execute("list_dir", {"path": "~"}) == await unfenced.execute(
        "list_dir", {"path": str(home)}
    )


async def test_unfenced_an_unknown_accounts_home_is_said_plainly(ws: Path) -> None:
    tools = build_registry(workspace=ws, restrict_to_workspace=False, exec_timeout=1)
    result = await tools.execute("read_file", {"path": "~no-such-account-7f2c/x"})
    assert result == (
        "Error: path '~no-such-account-7f2c/x' starts with the home folder of "
        "'~no-such-account-7f2c', which this server does not have; give the path without '~'"
    )


async def test_a_file_named_with_a_tilde_is_reached_from_dot(ws: Path) -> None:
    tools = build_registry(workspace=ws, exec_timeout=1)
    assert await tools.execute("write_file", {"path": "./~bob", "content": "x"}) == (
        "Wrote 1 bytes to ./~bob"
    )
    assert (ws / "~bob").read_text() == "x"


# --- no path fails unexpectedly ----------------------------------------------------------


def odd_paths(ws: Path) -> list[str]:
    (ws / "f.txt").write_text("text")
    (ws / "d").mkdir()
    os.mkfifo(ws / "d" / "pipe")
    (ws / "loop").symlink_to("loop")
    (ws / "ping").symlink_to("pong")
    (ws / "pong").symlink_to("ping")
    return [
        "a\x00b",
        "x" * 300,
        "." * 300,
        ("d" * 200 + "/") * 21 + "f",  # past PATH_MAX, in few levels
        "loop",
        "loop/x",
        "ping",
        "f.txt/x",
        "../" * 60 + "etc/passwd",
        "d/../../..",
        "\ud800",
        "caf\udce9.txt",
        "",
        ".",
        "/",
        "//",
        "~",
        "~/",
        "~bob/../x",
        "\n",
        "d/pipe",
        "d/./pipe/",
        "f.txt/",
        "/proc/self/fd/0",
    ]


@pytest.mark.parametrize("restrict", [True, False], ids=["fenced", "unfenced"])
@pytest.mark.parametrize(("tool", "extra"), FILE_CALLS)
async def test_no_path_makes_a_file_tool_fail_unexpectedly(
    ws: Path, tool: str, extra: dict[str, Any], restrict: bool
) -> None:
    paths = odd_paths(ws)
    tools = build_registry(workspace=ws, restrict_to_workspace=restrict, exec_timeout=1)
    writes = tool in ("write_file", "append_file", "edit_file")
    for path in paths:
        if not restrict and writes and path.startswith(("/", "~", "../")):
            continue  # unfenced, these are the server's own files
        result = await tools.execute(tool, {"path": path, **extra})
        assert "unexpectedly" not in result, (path, result)
        assert "failed:" not in result, (path, result)  # the system's bare words
        result.encode("utf-8")  # sendable and storable


@pytest.mark.parametrize("tool", ["write_file", "append_file"])
async def test_text_no_utf8_can_hold_is_written_as_a_replacement_character(
    ws: Path, tool: str
) -> None:
    """The registry cleans what the model sends (`agent.cleantext`): a lone surrogate is
    written as U+FFFD, never a failure."""
    tools = build_registry(workspace=ws, exec_timeout=1)
    result = await tools.execute(tool, {"path": "a.txt", "content": "ok \ud800 not"})
    assert result.startswith(("Wrote", "Appended")), result
    assert (ws / "a.txt").read_text() == "ok \ufffd not"
    (ws / "b.txt").write_text("old")
    edit = {"path": "b.txt", "old_text": "old", "new_text": "\udcff"}
    assert (await tools.execute("edit_file", edit)).startswith("Replaced 1 occurrence")
    assert (ws / "b.txt").read_text() == "\ufffd"


async def test_a_tool_called_directly_refuses_text_no_utf8_can_hold(ws: Path) -> None:
    """A tool called by code of its own, past the registry, says so plainly."""
    from agent.tools import ToolContext, ToolError
    from agent.tools.files import WriteFileTool
    from agent.tools.guards import Workspace

    tool = WriteFileTool(Workspace(ws))
    with pytest.raises(ToolError, match=r"content holds a lone surrogate \(character 4\)"):
        await tool.execute(ToolContext.detached(), path="a.txt", content="ok \ud800 not")
    assert not (ws / "a.txt").exists()


def test_a_deep_tree_is_walked_with_few_descriptors(tmp_path: Path) -> None:
    top = tmp_path / "deep"
    bottom = top.joinpath(*(f"l{level}" for level in range(100)))
    bottom.mkdir(parents=True)
    (bottom / "end.txt").write_text("")
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    before = len(os.listdir("/proc/self/fd"))
    most = before

    def keep(entry: Entry) -> bool:
        nonlocal most
        most = max(most, len(os.listdir("/proc/self/fd")))
        return True

    try:
        found = [entry.path for entry in walk(fd, keep=keep, enter=lambda entry: True)]
    finally:
        os.close(fd)
    assert found[-1] == "/".join(f"l{level}" for level in range(100)) + "/end.txt"
    assert len(found) == 101
    assert most - before <= MAX_HELD + 1
    assert len(os.listdir("/proc/self/fd")) == before - 1  # all closed, `fd` too
