"""Retrying a model call that failed for a moment, with tenacity.

Exponential backoff with full jitter, or the wait the server asked for (Retry-After), for
at most `max_retries` retries whose waits add up to no more than `budget` seconds. Only
failures of the "transient" kind are retried. Imported once a call has failed: most never
do, and a command line's single turn should not pay for the import.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

import tenacity

from agent.llm.error_kinds import LLMError

logger = logging.getLogger(__name__)

T = TypeVar("T")
# What a caller is told before each retry: its number, the wait, the failure.
RetryCallback = Callable[[int, float, LLMError], Awaitable[None]]

BACKOFF_FIRST = 1.0
BACKOFF_CAP = 30.0


async def call_again(
    call: Callable[[], Awaitable[T]],
    failure: LLMError,
    *,
    max_retries: int,
    budget: float,
    on_retry: RetryCallback | None = None,
) -> T:
    """Retry `call`, whose first attempt failed with `failure`, while its failures are
    transient and the limits allow; its result, or the last failure raised."""
    pending = [failure]

    async def attempt() -> T:
        # The first attempt is the failure the caller already had, replayed so that it
        # counts towards the limits and its wait (and Retry-After) is tenacity's to choose.
        if pending:
            raise pending.pop()
        return await call()

    async def before_sleep(state: tenacity.RetryCallState) -> None:
        error = _failure(state)
        delay = state.upcoming_sleep
        logger.warning(
            "model call failed (%s), retry %d in %.1fs", error, state.attempt_number, delay
        )
        if on_retry is not None and error is not None:
            await on_retry(state.attempt_number, delay, error)

    retrying = tenacity.AsyncRetrying(
        retry=tenacity.retry_if_exception(lambda exc: isinstance(exc, LLMError) and exc.transient),
        wait=_RetryAfterOr(
            tenacity.wait_random_exponential(multiplier=BACKOFF_FIRST, max=BACKOFF_CAP)
        ),
        stop=tenacity.stop_after_attempt(max_retries + 1) | _PastBudget(budget),
        before_sleep=before_sleep,
        sleep=asyncio.sleep,
        reraise=True,
    )
    return await retrying(attempt)


def _failure(state: tenacity.RetryCallState) -> LLMError | None:
    error = state.outcome.exception() if state.outcome is not None else None
    return error if isinstance(error, LLMError) else None


class _RetryAfterOr(tenacity.wait.wait_base):
    """The wait the server asked for, when it did; `backoff`'s otherwise."""

    def __init__(self, backoff: tenacity.wait.wait_base) -> None:
        self.backoff = backoff

    def __call__(self, state: tenacity.RetryCallState) -> float:
        error = _failure(state)
        if error is not None and error.retry_after is not None:
            return max(0.0, error.retry_after)
        return float(self.backoff(state))


class _PastBudget(tenacity.stop.stop_base):
    """Stop when the next wait would take the waits past `budget` seconds in all."""

    def __init__(self, budget: float) -> None:
        self.budget = budget

    def __call__(self, state: tenacity.RetryCallState) -> bool:
        return state.idle_for + state.upcoming_sleep > self.budget
