"""The site's web process: daphne, as `manage.py serve` runs it (`python -m agentsite.web`
takes daphne's own arguments).

One change to daphne: Twisted, under it, parses a POST's form body (multipart or
urlencoded) into arguments of its own before daphne hands the raw body to Django. Nothing
reads them, an upload would sit in memory twice, and a body it cannot parse is answered
with a bare 400 and no JSON before the site ever sees it. Here Twisted leaves bodies alone,
and Django alone parses them, with its limits and its error answers.

Before daphne starts, the settings that would fail every request are checked (`agent.checks`):
a wrong one stops the process with one line saying which and why.
"""

from __future__ import annotations

import os
import sys
from typing import Any


def main() -> None:
    refuse_bad_settings()
    from daphne import http_protocol
    from daphne.cli import CommandLineInterface

    class RawBodyRequest(http_protocol.WebRequest):  # type: ignore[misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            # What `parsePOSTFormSubmission=False` sets in the Twisted of the lock file; an
            # older one takes no such argument, ignores the attribute and parses as before.
            self._parsePOSTFormSubmission = False

    # daphne's factory looks the class up by this name each time it makes a connection.
    http_protocol.WebRequest = RawBodyRequest
    CommandLineInterface.entrypoint()


def refuse_bad_settings() -> None:
    """Exit with one line if the site's settings name tools or hooks that do not load:
    daphne would serve anyway, and every turn would fail or run without them."""
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")
    django.setup()
    from agent.checks import setting_problems

    problems = setting_problems()
    if problems:
        sys.exit(f"error: {'; '.join(problems)}")


if __name__ == "__main__":
    main()
