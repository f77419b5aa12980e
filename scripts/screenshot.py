"""Take the screenshot of the chat page that README and docs/index.md show: a scratch site,
the scripted model, one turn with a tool call, in Debian's Chromium.

    .venv/bin/python scripts/screenshot.py [--out docs/chat.png] [--dark]
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.llm_server import ScriptedLLM  # noqa: E402

LOGIN = ("ada", "screenshot-password-1")
REPLY = (
    "I wrote **notes/plan.md** with the three steps:\n\n"
    "| step | what | when |\n|---|---|---|\n"
    "| 1 | read the logs | today |\n| 2 | fix the cron job | today |\n"
    "| 3 | tell the team | Friday |\n\n"
    "```python\nfor step in plan:\n    step.run()\n```"
)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "chat.png")
    parser.add_argument("--dark", action="store_true", help="the dark theme")
    args = parser.parse_args()

    from playwright.sync_api import expect, sync_playwright

    with tempfile.TemporaryDirectory(prefix="screenshot-") as scratch, ScriptedLLM() as llm:
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("AGENT_", "DJANGO_", "DATABASE_", "REDIS_"))
        }
        env.update(
            AGENT_DATA_DIR=f"{scratch}/data",
            AGENT_WORKSPACE=f"{scratch}/workspace",
            AGENT_MODEL="openai/scripted",
            AGENT_API_BASE=llm.base_url,
            AGENT_MODEL_PRICES='{"openai/scripted": {"input": 2.5, "output": 10}}',
            DJANGO_SECRET_KEY="screenshot-" + "k" * 50,
            DJANGO_SUPERUSER_USERNAME=LOGIN[0],
            DJANGO_SUPERUSER_PASSWORD=LOGIN[1],
        )
        manage = [sys.executable, "manage.py"]
        subprocess.run([*manage, "migrate", "-v0"], cwd=ROOT, env=env, check=True)
        subprocess.run([*manage, "ensure_login"], cwd=ROOT, env=env, check=True)
        port = free_port()
        web = [sys.executable, "-m", "agentsite.web", "-v", "0", "-b", "127.0.0.1", "-p", str(port)]
        server = subprocess.Popen([*web, "agentsite.asgi:application"], cwd=ROOT, env=env)
        try:
            for _ in range(300):
                with socket.socket() as probe:
                    if probe.connect_ex(("127.0.0.1", port)) == 0:
                        break
                time.sleep(0.1)
            llm.tool_call("write_file", {"path": "notes/plan.md", "content": "1. read the logs"})
            llm.reply(REPLY, chunks=12)
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(
                    executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"]
                )
                page = browser.new_page(
                    viewport={"width": 1200, "height": 760},
                    color_scheme="dark" if args.dark else "light",
                )
                site = f"http://127.0.0.1:{port}"
                page.goto(site + "/")
                page.fill("input[name=username]", LOGIN[0])
                page.fill("input[name=password]", LOGIN[1])
                page.click("button[type=submit]")
                page.wait_for_url("**/c/**")
                page.fill("#composer", "Plan the fix for the nightly job and write it down")
                page.press("#composer", "Enter")
                page.locator(".msg.assistant table").wait_for()
                page.locator("#thinking").wait_for(state="hidden")
                # The chat takes its title from the first message a moment after the reply.
                expect(page.locator("#chat-title")).not_to_have_text("New chat", timeout=10_000)
                args.out.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(args.out))
                browser.close()
        finally:
            server.terminate()
            server.wait(timeout=10)
    sys.stdout.write(f"wrote {args.out}\n")


if __name__ == "__main__":
    main()
