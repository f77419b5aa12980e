"""Write the settings table of docs/configuration.md from the settings' declaration.

Each of the agent's settings is declared once, in `agent.conf_declared.SETTINGS`, with its
name, kind, default and doc line; the table between this module's two markers in
docs/configuration.md is made from that list only, so it cannot drift from what the code
reads (tests/test_docs.py fails when it has).

    .venv/bin/python scripts/settings_table.py           # rewrite the table
    .venv/bin/python scripts/settings_table.py --check   # exit 1 if it is out of date
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agent.conf_declared import SETTINGS, Setting  # noqa: E402

logger = logging.getLogger(__name__)

PAGE = ROOT / "docs" / "configuration.md"
START = "<!-- settings-table:start, made by scripts/settings_table.py -->"
END = "<!-- settings-table:end -->"

# Where the manual says more of a setting: navigation, not a fact about the setting, so
# it lives with the table's maker rather than in the declaration.
MORE = {
    "AGENT_MODEL": "install.md#set-the-model",
    "AGENT_API_BASE": "install.md#set-the-model",
    "AGENT_MODELS": "web.md",
    "AGENT_CONTEXT_WINDOW": "memory.md",
    "AGENT_MEMORY_WINDOW": "memory.md",
    "AGENT_WORKSPACE": "folders.md",
    "AGENT_RESTRICT_TO_WORKSPACE": "folders.md",
    "AGENT_TEAM_FILES_IN_PERSONAL_CHATS": "team-chats.md",
    "AGENT_EXEC_NETWORK": "folders.md",
    "AGENT_HEARTBEAT_INTERVAL": "background.md",
    "AGENT_CRON_MAX_JOBS": "background.md",
    "AGENT_TRACE": "observability.md",
    "OTEL_EXPORTER_OTLP_ENDPOINT": "observability.md#exporting-to-an-opentelemetry-collector",
    "AGENT_MODEL_PRICES": "usage.md",
    "AGENT_USER_DAILY_BUDGET": "usage.md",
    "AGENT_TOOLS": "tools.md#tools-of-your-own",
    "AGENT_APPROVE_TOOLS": "approvals.md",
    "AGENT_APPROVAL_TIMEOUT": "approvals.md",
    "AGENT_HOOKS_FILE": "hooks.md",
    "AGENT_HOOKS": "hooks.md",
    "AGENT_PROXY_COUNT": "operations.md",
    "AGENT_WORKERS": "operations.md",
}


def _default(spec: Setting) -> str:
    value: Any = spec.default
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list | tuple):
        return ", ".join(f"`{item}`" for item in value) or "none"
    if value == "":
        return "unset"
    return f"`{value}`" if isinstance(value, str) else str(value)


def _cell(text: str) -> str:
    # A pipe would end the cell; a doc line is one line by declaration.
    return text.replace("|", "\\|")


def _row(spec: Setting) -> str:
    what = _cell(spec.doc)
    if spec.choices:
        what += "; one of " + ", ".join(f"`{choice}`" for choice in spec.choices)
    if spec.aliases:
        what += "; formerly " + ", ".join(f"`{alias}`" for alias in spec.aliases)
    if spec.name in MORE:
        what += f" ([more]({MORE[spec.name]}))"
    return f"| `{spec.name}` | {_default(spec)} | {what} |"


def table() -> str:
    """The table, markers included, as docs/configuration.md should hold it."""
    rows = [_row(spec) for spec in SETTINGS]
    return "\n".join([START, "| variable | default | what it does |", "|---|---|---|", *rows, END])


def rewritten(page: str) -> str:
    """`page` with the text between the markers replaced by the current table."""
    start, end = page.index(START), page.index(END) + len(END)
    return page[:start] + table() + page[end:]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only say whether it is current")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    current = PAGE.read_text(encoding="utf-8")
    wanted = rewritten(current)
    if current == wanted:
        logger.info("%s: the settings table is current", PAGE.relative_to(ROOT))
        return 0
    if args.check:
        logger.error("%s: the settings table is out of date", PAGE.relative_to(ROOT))
        return 1
    PAGE.write_text(wanted, encoding="utf-8")
    logger.info("%s: the settings table rewritten", PAGE.relative_to(ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
