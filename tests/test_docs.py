"""The manual and README say what the code does: the settings table is the declaration's,
every page of docs/ is in the site's navigation, and README stays one page that asks for
what the first command needs before it shows that command."""

from __future__ import annotations

import dataclasses
import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from agent.conf_declared import SETTINGS, Setting

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README = ROOT / "README.md"
GENERATOR = ROOT / "scripts" / "settings_table.py"


@pytest.fixture(scope="module")
def generator() -> ModuleType:
    # scripts/ is no package: loaded from its file, as `python scripts/settings_table.py` runs it.
    spec = importlib.util.spec_from_file_location("settings_table", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_settings_table_is_the_declarations(generator: ModuleType) -> None:
    page = (DOCS / "configuration.md").read_text(encoding="utf-8")
    assert generator.START in page and generator.END in page
    assert generator.rewritten(page) == page, (
        "docs/configuration.md's settings table differs from agent/conf_declared.py: "
        "run .venv/bin/python scripts/settings_table.py"
    )


def test_the_table_has_one_row_per_declared_setting_in_its_order(generator: ModuleType) -> None:
    page = (DOCS / "configuration.md").read_text(encoding="utf-8")
    inside = page[page.index(generator.START) : page.index(generator.END)]
    names = re.findall(r"^\| `(\w+)` \|", inside, flags=re.MULTILINE)
    assert names == [spec.name for spec in SETTINGS]


def test_a_changed_declaration_makes_the_table_out_of_date(
    generator: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = (DOCS / "configuration.md").read_text(encoding="utf-8")
    first = SETTINGS[0]
    changed = dataclasses.replace(first, doc=first.doc + ", changed")
    monkeypatch.setattr(generator, "SETTINGS", (changed, *SETTINGS[1:]))
    assert generator.rewritten(page) != page
    added = Setting("AGENT_NEW_ONE", "int", 3, "a setting the table has not heard of", "new_one")
    monkeypatch.setattr(generator, "SETTINGS", (*SETTINGS, added))
    assert "| `AGENT_NEW_ONE` | 3 | a setting the table has not heard of |" in (
        generator.rewritten(page)
    )


def test_the_generator_checks_from_the_command_line() -> None:
    done = subprocess.run(
        [sys.executable, str(GENERATOR), "--check"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr


def _nav_pages() -> list[str]:
    """The pages mkdocs.yml's nav names (`- Title: page.md`), in order."""
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    nav = text[text.index("\nnav:") :]
    return re.findall(r"^\s+- [^:\n]+: (\S+\.md)$", nav, flags=re.MULTILINE)


def test_every_page_is_in_the_nav_and_every_nav_entry_is_a_page() -> None:
    pages = sorted(path.relative_to(DOCS).as_posix() for path in DOCS.rglob("*.md"))
    nav = _nav_pages()
    assert len(nav) == len(set(nav)), "a page is twice in the nav"
    assert sorted(nav) == pages


def test_the_nav_covers_the_manuals_subjects() -> None:
    nav = set(_nav_pages())
    subjects = {
        "web.md", "cli.md", "api.md", "openai.md", "operations.md", "security.md",
        "configuration.md", "hooks.md", "approvals.md", "background.md", "mcp.md",
        "skills.md", "observability.md", "usage.md", "benchmarks.md", "development.md",
    }  # fmt: skip
    assert subjects <= nav


def test_pages_brought_in_from_beside_docs_name_files_that_exist() -> None:
    for page in ("security.md", "benchmarks.md"):
        included = re.findall(r'^--8<-- "([^"]+)"$', (DOCS / page).read_text(), re.MULTILINE)
        assert included and all((ROOT / name).is_file() for name in included), page


def test_readme_is_one_page_with_the_requirements_before_the_first_command() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200
    requirements = next(i for i, line in enumerate(lines) if line.startswith("## Requirements"))
    first_run = next(i for i, line in enumerate(lines) if "make run" in line)
    assert requirements < first_run
    section = "\n".join(lines[requirements:first_run])
    assert "Python 3.11" in section and "apt-get install bubblewrap" in section


def test_readmes_links_to_files_lead_somewhere() -> None:
    text = README.read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [target for target in targets if "://" not in target]
    assert local, "README links to the manual"
    assert [target for target in local if not (ROOT / target).exists()] == []
