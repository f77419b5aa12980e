"""The site's log lines as a terminal shows them: with the control characters of what they
quote written out. A log line names what users and the model made (a file's name, a
command, a provider's words), and the console that shows it (`serve`'s, `manage.py
agent`'s standard error) would act on an escape sequence in it: retitle the window, clear
the screen, write the clipboard."""

from __future__ import annotations

import logging

from agent.cleantext import visible


class VisibleFormatter(logging.Formatter):
    """`logging.Formatter` whose lines, tracebacks included, hold no control character but
    newlines and tabs (`agent.cleantext.visible`)."""

    def format(self, record: logging.LogRecord) -> str:
        return visible(super().format(record))
