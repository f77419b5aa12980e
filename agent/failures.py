"""Failures nobody asked for: the detail goes to the log under a short reference, and the
user, the API and the run record get only that reference.

An exception's text can carry a connection string, a path or a query; a reference lets an
operator find the traceback without anyone else reading it.
"""

from __future__ import annotations

import logging
import secrets

SORRY = "Sorry, something went wrong on our side (reference {ref})."


def log_failure(logger: logging.Logger, what: str, *args: object) -> str:
    """Log the exception being handled, with `what` (%-formatted with `args`), under a new
    reference, and return the reference."""
    ref = secrets.token_hex(4)
    logger.exception(f"{what} [reference %s]", *args, ref)
    return ref


def internal_error(ref: str) -> str:
    """What a user reads about a failure of ours."""
    return SORRY.format(ref=ref)
