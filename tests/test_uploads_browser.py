"""The chat page's attach button in a real headless Chromium: the chosen file lands in the
user's folder, shows as a chip above the message box, its path goes with the next message,
and a file past the cap is refused aloud."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.llm_server import ScriptedLLM
from tests.test_browser import USERNAME, log_in, page  # noqa: F401  (the `page` fixture)
from tests.test_browser import pytestmark as browser_marks

pytestmark = browser_marks


@pytest.fixture
def small_uploads(site_env: dict[str, str]) -> None:
    site_env["AGENT_MAX_UPLOAD_BYTES"] = "1000"


def test_a_file_attached_on_the_page(
    small_uploads: None,
    page,  # noqa: F811
    live_site: str,
    llm: ScriptedLLM,
    workspace: Path,
    tmp_path: Path,
) -> None:
    from playwright.sync_api import expect

    log_in(page, live_site)
    chosen = tmp_path / "figures.csv"
    chosen.write_text("apples,42\n")

    page.fill("#composer", "Please sum these up")
    attach = page.get_by_role("button", name="Attach a file")
    with page.expect_file_chooser() as chooser:
        attach.click()
    chooser.value.set_files(str(chosen))

    composer = page.locator("#composer")
    chips = page.locator("#attachments .attachment")
    expect(chips).to_have_count(1)
    expect(chips.first).to_have_attribute("data-path", "uploads/figures.csv")
    expect(composer).to_have_value("Please sum these up")
    expect(composer).to_be_focused()
    stored = workspace / "users" / USERNAME / "uploads" / "figures.csv"
    assert stored.read_text() == "apples,42\n"

    # The same name again is kept beside the first, from the keyboard this time. Enter on
    # the button opens the file input; Chromium does not always report a second chooser of
    # one input to the test, so the file is given to the input itself.
    page.evaluate(
        """() => document.getElementById("attach-input").addEventListener(
             "click", () => { window.chooserOpened = true; })"""
    )
    expect(attach).to_be_enabled()
    attach.focus()
    page.keyboard.press("Enter")
    assert page.evaluate("window.chooserOpened") is True
    page.set_input_files("#attach-input", str(chosen))
    expect(chips).to_have_count(2)
    expect(chips.nth(1)).to_have_attribute("data-path", "uploads/figures (1).csv")
    assert (stored.parent / "figures (1).csv").read_text() == "apples,42\n"

    # The agent is told where the file is, and reads it.
    llm.tool_call("read_file", {"path": "uploads/figures.csv"}).reply("42 apples.")
    page.press("#composer", "Enter")
    expect(page.locator(".msg.user").last).to_have_text(
        "Please sum these up\nAttached: uploads/figures.csv\nAttached: uploads/figures (1).csv"
    )
    expect(chips).to_have_count(0)
    expect(page.locator(".msg.assistant").last).to_contain_text("42 apples.")
    tool_results = [m for m in llm.requests[-1]["messages"] if m["role"] == "tool"]
    assert "apples,42" in tool_results[0]["content"]

    # Too large: said in the notices, nothing added to the box or the folder.
    big = tmp_path / "big.bin"
    big.write_bytes(b"x" * 1001)
    with page.expect_file_chooser() as chooser:
        attach.click()
    chooser.value.set_files(str(big))
    expect(page.locator(".notice")).to_contain_text(
        "Could not attach big.bin: The file is too large: at most 1000 bytes are accepted."
    )
    expect(composer).to_have_value("")
    expect(chips).to_have_count(0)
    expect(attach).to_be_enabled()
    assert sorted(p.name for p in stored.parent.iterdir()) == ["figures (1).csv", "figures.csv"]


def test_files_dropped_on_the_chat_are_attached(
    page,  # noqa: F811
    live_site: str,
    workspace: Path,
) -> None:
    from playwright.sync_api import expect

    log_in(page, live_site)
    # What a drop of two files from the desktop hands the page.
    drop = page.evaluate_handle(
        """() => {
             const data = new DataTransfer();
             data.items.add(new File(["a,1\\n"], "one.csv", { type: "text/csv" }));
             data.items.add(new File(["b,2\\n"], "two.csv", { type: "text/csv" }));
             return data;
           }"""
    )
    main = page.locator(".main")
    main.dispatch_event("dragenter", {"dataTransfer": drop})
    expect(main).to_have_class(re.compile(r"\bdropping\b"))
    main.dispatch_event("drop", {"dataTransfer": drop})

    chips = page.locator("#attachments .attachment")
    expect(chips).to_have_count(2)
    expect(chips.nth(0)).to_have_attribute("data-path", "uploads/one.csv")
    expect(chips.nth(1)).to_have_attribute("data-path", "uploads/two.csv")
    expect(main).not_to_have_class(re.compile(r"\bdropping\b"))
    folder = workspace / "users" / USERNAME / "uploads"
    assert (folder / "one.csv").read_text() == "a,1\n"
    assert (folder / "two.csv").read_text() == "b,2\n"
