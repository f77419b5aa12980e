"""The shared guards: workspace fence, exec deny policy, output cap."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.tools.base import ToolError
from agent.tools.guards import GuardError, Workspace, cap_output, check_command


@pytest.fixture
def root(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    (ws / "sub" / "a.txt").write_text("a")
    return ws


def test_relative_paths_resolve_inside(root: Path) -> None:
    ws = Workspace(root)
    assert ws.resolve("sub/a.txt") == root.resolve() / "sub" / "a.txt"
    assert ws.resolve(".") == root.resolve()
    assert ws.resolve("") == root.resolve()
    assert ws.resolve("sub/../sub/a.txt") == root.resolve() / "sub" / "a.txt"
    # Paths that don't exist yet are fine (write_file creates them).
    assert ws.resolve("new/dir/file.txt") == root.resolve() / "new" / "dir" / "file.txt"


def test_absolute_path_inside_is_allowed(root: Path) -> None:
    ws = Workspace(root)
    assert ws.resolve(str(root / "sub" / "a.txt")) == root.resolve() / "sub" / "a.txt"


@pytest.mark.parametrize("path", ["..", "../x", "sub/../../x", "sub/../../../etc/passwd"])
def test_dotdot_out_of_the_workspace_is_refused(root: Path, path: str) -> None:
    with pytest.raises(GuardError, match="outside the workspace"):
        Workspace(root).resolve(path)


def test_message_names_the_path(root: Path) -> None:
    with pytest.raises(GuardError) as info:
        Workspace(root).resolve("../x")
    assert "path '../x' is outside the workspace" in str(info.value)


def test_absolute_path_outside_is_refused(root: Path, outside: Path) -> None:
    with pytest.raises(GuardError, match="outside the workspace"):
        Workspace(root).resolve(str(outside / "secret.txt"))
    with pytest.raises(GuardError):
        Workspace(root).resolve("/etc/passwd")


def test_home_directory_is_refused(root: Path) -> None:
    with pytest.raises(GuardError):
        Workspace(root).resolve("~/.bashrc")


def test_symlinked_file_pointing_outside_is_refused(root: Path, outside: Path) -> None:
    (root / "link.txt").symlink_to(outside / "secret.txt")
    with pytest.raises(GuardError, match="outside the workspace"):
        Workspace(root).resolve("link.txt")


def test_symlinked_dir_pointing_outside_is_refused(root: Path, outside: Path) -> None:
    (root / "linkdir").symlink_to(outside, target_is_directory=True)
    ws = Workspace(root)
    for path in ("linkdir", "linkdir/secret.txt", "linkdir/new.txt", "sub/../linkdir/x"):
        with pytest.raises(GuardError):
            ws.resolve(path)


def test_dangling_symlink_pointing_outside_is_refused(root: Path, outside: Path) -> None:
    (root / "dangling").symlink_to(outside / "does-not-exist-yet")
    with pytest.raises(GuardError):
        Workspace(root).resolve("dangling")


def test_symlink_that_stays_inside_is_allowed(root: Path) -> None:
    (root / "alias").symlink_to(root / "sub", target_is_directory=True)
    assert Workspace(root).resolve("alias/a.txt") == root.resolve() / "sub" / "a.txt"


def test_symlinked_workspace_root_still_contains_its_children(tmp_path: Path, root: Path) -> None:
    link = tmp_path / "ws-link"
    link.symlink_to(root, target_is_directory=True)
    ws = Workspace(link)
    assert ws.resolve("sub/a.txt") == root.resolve() / "sub" / "a.txt"
    assert ws.resolve(str(link / "sub" / "a.txt")) == root.resolve() / "sub" / "a.txt"


def test_restriction_off_allows_anything(root: Path, outside: Path) -> None:
    ws = Workspace(root, restrict=False)
    (root / "link.txt").symlink_to(outside / "secret.txt")
    assert ws.resolve("../outside/secret.txt") == (outside / "secret.txt").resolve()
    assert ws.resolve(str(outside)) == outside.resolve()
    assert ws.resolve("link.txt") == (outside / "secret.txt").resolve()
    # Relative paths are still relative to the workspace.
    assert ws.resolve("sub/a.txt") == root.resolve() / "sub" / "a.txt"


def test_nul_byte_is_refused(root: Path) -> None:
    with pytest.raises(GuardError, match="NUL"):
        Workspace(root).resolve("a\x00b")


def test_guard_error_is_a_tool_error() -> None:
    assert issubclass(GuardError, ToolError)


def test_display(root: Path, outside: Path) -> None:
    ws = Workspace(root)
    assert ws.display(root.resolve() / "sub" / "a.txt") == "sub/a.txt"
    assert ws.display(root.resolve()) == "."
    assert ws.display(outside.resolve()) == str(outside.resolve())


@pytest.mark.parametrize(
    "command",
    [
        "rm -rf /",
        "rm -fr /",
        "rm -rf /*",
        "rm -rf ~",
        "rm -Rf ~/",
        "rm -r -f /",
        "rm --recursive --force /",
        "rm -rf $HOME",
        "rm -rf /etc",
        "sudo rm -rf --no-preserve-root /",
        "rm -rf --no-preserve-root /tmp/x",
        "mkfs.ext4 /dev/sda1",
        "mkfs -t ext4 /dev/sdb",
        "dd if=/dev/zero of=/dev/sda bs=1M",
        "echo hi > /dev/sda",
        "cat img >/dev/nvme0n1",
        "cat img | tee /dev/sdb",
        ":(){ :|:& };:",
        "bomb(){ bomb|bomb& };bomb",
        "shutdown -h now",
        "sudo shutdown now",
        "reboot",
        "ls && sudo -u root reboot",
        "/sbin/poweroff",
        "halt",
        "init 0",
        "init 6",
        "systemctl reboot",
        "format c:",
        "chmod -R 777 /",
        "chown -R nobody:nogroup /",
        "sh -c 'reboot'",
        'bash -lc "rm -rf /"',
        "echo $(reboot)",
        "echo `halt`",
        "if true; then reboot; fi",
        "echo ok\nshutdown now",
    ],
)
def test_destructive_commands_are_denied(command: str) -> None:
    reason = check_command(command)
    assert reason, f"{command!r} should be denied"


@pytest.mark.parametrize(
    "command",
    [
        "echo shutdownlog",
        "grep reboot file.txt",
        "grep -r halt .",
        'git commit -m "halt the build"',
        'echo "rm -rf /"',
        'echo "a; reboot"',
        "rm -rf ./build",
        "rm -rf build/",
        "rm -rf /tmp/scratch",
        "rm -f ~/notes.txt",
        "ls -la /",
        "ls ~",
        "chmod -R 755 src",
        "chmod 644 /tmp/x",
        "dd --help",
        "echo x > /dev/null",
        "echo x 2>/dev/stderr",
        "cat /dev/sda_notes.txt",
        "python -c 'print(1)'",
        "init_db --fresh",
        "mkdir format && ls format",
        "find . -name '*.py' | xargs wc -l",
        "./reboot_counter.sh",
    ],
)
def test_normal_commands_are_allowed(command: str) -> None:
    assert check_command(command) is None


def test_cap_output_leaves_short_text_alone() -> None:
    assert cap_output("hello", 10) == "hello"
    assert cap_output("x" * 10, 10) == "x" * 10


def test_cap_output_keeps_head_and_tail() -> None:
    text = "HEAD" + "m" * 1000 + "TAIL"
    capped = cap_output(text, 100)
    assert capped.startswith("HEAD")
    assert capped.endswith("TAIL")
    assert "908 characters cut" in capped
    assert len(capped) < 200
