"""The exec deny policy: a tripwire against obviously destructive commands."""

from __future__ import annotations

import re
import shlex

# Tokens that introduce another command rather than being one.
_PREFIX_WORDS = frozenset(
    {
        "sudo", "doas", "exec", "nohup", "time", "nice", "ionice", "env", "command",
        "builtin", "xargs", "timeout", "then", "do", "else", "elif", "if", "while",
        "until", "!", "{", "}", "(", ")",
    }
)  # fmt: skip
_SEPARATORS = frozenset({";", ";;", "&", "&&", "|", "||", "|&", "(", ")", "\n"})
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "ash", "busybox"})
_POWER_COMMANDS = frozenset({"shutdown", "reboot", "poweroff", "halt"})
_DANGEROUS_TARGETS = re.compile(
    r"""^(?:
        /+\.?\*?                                  # /  /*  //  /.
      | ~/*\*? | \$\{?HOME\}?/*\*?                # home directory
      | /+(?:bin|boot|dev|etc|home|lib|lib32|lib64|opt|proc|root|sbin|srv|sys|usr|var)/*\*?
    )$""",
    re.VERBOSE,
)
_BLOCK_DEVICE = r"/dev/(?:(?:sd|hd|vd|xvd)[a-z]|nvme\d|mmcblk\d|disk\d|rdisk\d|md\d|dm-\d|loop\d)"
_RAW_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("fork bomb", re.compile(r"([\w:.]+)\s*\(\s*\)\s*\{[^}]*\1\s*\|\s*&?\s*\1\s*&")),
    ("write to a raw block device", re.compile(r">\s*" + _BLOCK_DEVICE)),
    ("write to a raw block device", re.compile(r"\btee\b[^;&|\n]*\s" + _BLOCK_DEVICE)),
    ("rm --no-preserve-root", re.compile(r"--no-preserve-root\b")),
]
_NESTED = re.compile(r"\$\(([^()]*)\)|`([^`]*)`")
_MAX_DEPTH = 4


def check_command(command: str) -> str | None:
    """Return why ``command`` is refused, or None when it may run.

    This is a tripwire against obviously destructive commands, not a sandbox: it looks at
    command words (after ``;``, ``&&``, ``|``, ``sudo``, ``sh -c`` ...), so ``grep reboot``
    or ``echo shutdownlog`` pass while ``sudo reboot`` does not.
    """
    return _check(command, depth=0)


def _check(command: str, *, depth: int) -> str | None:
    if depth > _MAX_DEPTH:
        return "command nesting is too deep to check"
    for reason, pattern in _RAW_PATTERNS:
        if pattern.search(command):
            return reason
    for nested in _NESTED.finditer(command):
        found = _check(nested.group(1) or nested.group(2) or "", depth=depth + 1)
        if found:
            return found
    for words in _simple_commands(command):
        found = _check_words(words, depth=depth)
        if found:
            return found
    return None


def _simple_commands(command: str) -> list[list[str]]:
    """Split ``command`` into the word lists of its simple commands (quotes honoured)."""
    text = command.replace("\n", " ; ")
    try:
        lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        tokens = list(lexer)
    except ValueError:
        # Unbalanced quotes: the shell would refuse too, but check the words anyway.
        tokens = re.split(r"(\s+|[;&|()])", text)
        tokens = [t.strip("'\"") for t in tokens if t and not t.isspace()]
    commands: list[list[str]] = [[]]
    for token in tokens:
        if token in _SEPARATORS:
            commands.append([])
        else:
            commands[-1].append(token)
    return [words for words in commands if words]


def _check_words(words: list[str], *, depth: int) -> str | None:
    words = _strip_prefixes(words)
    if not words:
        return None
    name = words[0].rsplit("/", 1)[-1]
    args = words[1:]
    if name in _SHELLS or name == "eval":
        script = _shell_script(name, args)
        if script is not None:
            return _check(script, depth=depth + 1)
        return None
    if name in _POWER_COMMANDS:
        return f"'{name}' would power off or restart the machine"
    if name in {"init", "telinit"} and any(a in {"0", "6"} for a in args):
        return f"'{name} {args[0]}' would power off or restart the machine"
    if name == "systemctl" and any(
        a in {"reboot", "poweroff", "halt", "kexec", "soft-reboot"} for a in args
    ):
        return "systemctl would power off or restart the machine"
    if name.startswith("mkfs") or name in {"mke2fs", "mkswap"}:
        return f"'{name}' formats a filesystem"
    if name == "format" and any(re.match(r"^([a-zA-Z]:|/dev/)", a) for a in args):
        return "'format' would erase a disk"
    if name == "wipefs" and any(a in {"-a", "--all"} or a.startswith("-a") for a in args):
        return "'wipefs' would erase filesystem signatures"
    if name == "diskutil" and any(
        a.lower().startswith(("erase", "zerodisk", "securerase", "partitiondisk")) for a in args
    ):
        return "'diskutil' would erase a disk"
    if name == "dd" and any(a.startswith("if=") for a in args):
        return "'dd if=...' can overwrite disks; use cp or head instead"
    if name == "rm" and _recursive(args) and _hits_dangerous_target(args):
        return "recursive rm of the root or home directory"
    if name in {"chmod", "chown", "chgrp"} and _recursive(args) and _hits_dangerous_target(args):
        return f"recursive {name} of the root or home directory"
    return None


def _strip_prefixes(words: list[str]) -> list[str]:
    index = 0
    while index < len(words):
        word = words[index]
        if word in _PREFIX_WORDS or re.match(r"^[A-Za-z_]\w*=", word):
            index += 1
        elif index > 0 and words[index - 1] in _PREFIX_WORDS and word.startswith("-"):
            # Options of a prefix word, e.g. ``sudo -u root`` or ``nice -n 5``: skip the flag
            # and, for short flags that take a value, the value too.
            index += 2 if re.fullmatch(r"-[ungCcp]", word) else 1
        elif index > 0 and words[index - 1] in {"timeout", "nice"} and word[:1].isdigit():
            index += 1
        else:
            break
    return words[index:]


def _shell_script(name: str, args: list[str]) -> str | None:
    if name == "eval":
        return " ".join(args)
    for index, arg in enumerate(args):
        if arg.startswith("-") and "c" in arg.lstrip("-") and not arg.startswith("--"):
            return args[index + 1] if index + 1 < len(args) else None
    return None


def _recursive(args: list[str]) -> bool:
    return any(
        a == "--recursive" or (a.startswith("-") and not a.startswith("--") and "r" in a.lower())
        for a in args
    )


def _hits_dangerous_target(args: list[str]) -> bool:
    return any(_DANGEROUS_TARGETS.match(a) for a in args if not a.startswith("-"))
