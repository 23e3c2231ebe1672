"""What a failed model call means, for every provider: the Krill error it becomes (with the
status, wait and retry hint the provider's answer carried), and whether to try the same
model again and after how long.

Krill retries model calls itself (the SDKs run with `max_retries=0`): the SDKs would sit
out any `retry-after` a server names, and retry an overload, where a turn with a fallback
model left should move on at once.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Mapping

from bot.backoff import backoff_delay
from bot.errors import (
    ContextOverflow,
    ModelAuthError,
    ModelError,
    ModelNotConfigured,
    ModelOverloaded,
    ModelRateLimited,
    ModelStreamInterrupted,
    ModelUnavailable,
)

# The SDKs' own backoff between retries: 0.5 s doubling to 8 s, less up to a quarter.
FIRST_RETRY_DELAY = 0.5
MAX_RETRY_DELAY = 8.0
JITTER = 0.25


def retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds the server asked to wait: `retry-after-ms`, `retry-after` (seconds or an
    HTTP date), or None."""
    if (ms := headers.get("retry-after-ms")) is not None:
        try:
            return float(ms) / 1000
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    parsed = email.utils.parsedate_tz(value)
    if parsed is None:
        return None
    return max(email.utils.mktime_tz(parsed) - (time.time() if now is None else now), 0.0)


def from_response(error: ModelError, status: int, headers: Mapping[str, str]) -> ModelError:
    """`error` with what the provider's HTTP answer said about retrying."""
    error.status = status
    error.retry_after = retry_after(headers)
    hint = headers.get("x-should-retry")
    error.should_retry = {"true": True, "false": False}.get(hint or "")
    return error


def by_status(status: int, message: str) -> ModelError:
    """The Krill error for an HTTP status whose body said nothing more specific."""
    if status in (401, 403):
        return ModelAuthError(message)
    if status == 429:
        return ModelRateLimited(message)
    if status == 529:
        return ModelOverloaded(message)
    if status >= 500 or status in (408, 409):
        return ModelUnavailable(message)
    return ModelError(f"model rejected the request: {message}")


def interrupted(mapped: ModelError) -> ModelError:
    """The same failure seen after the reply had begun streaming: worth one more attempt,
    unless no attempt can fix it (bad key, prompt too long)."""
    if isinstance(mapped, ContextOverflow | ModelAuthError | ModelNotConfigured):
        return mapped
    if type(mapped) in (ModelError, ModelUnavailable):  # a transport failure, not an answer
        mapped = ModelStreamInterrupted(str(mapped))
    mapped.retryable = True
    return mapped


def retry_delay(
    error: ModelError,
    *,
    retries_done: int,
    max_retries: int,
    longest_wait: float,
    fallback_left: bool,
    jitter: float,
) -> float | None:
    """Seconds to wait before asking the same model again, or None to stop: fall back to
    the next model, or give up. `jitter` is a random number in [0, 1)."""
    if error.retryable or retries_done >= max_retries or error.should_retry is False:
        return None  # a stream that broke mid-reply is the agent loop's to retry
    transient = isinstance(error, ModelOverloaded | ModelRateLimited | ModelUnavailable)
    if not transient and error.should_retry is not True:
        return None
    if isinstance(error, ModelOverloaded) and fallback_left:
        return None  # another model can answer now; this one said it cannot
    if error.retry_after is not None and error.retry_after > 0:
        return None if error.retry_after > longest_wait else error.retry_after
    delay = backoff_delay(retries_done + 1, FIRST_RETRY_DELAY, MAX_RETRY_DELAY)
    return delay * (1 - JITTER * jitter)
