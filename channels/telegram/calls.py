"""Bot API calls that may fail: what Telegram's errors mean, and one call retried through
flood control and transient failures."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from telegram.error import BadRequest, NetworkError, RetryAfter, TelegramError, TimedOut

from channels.telegram.polling import retry_after_seconds

log = logging.getLogger(__name__)

SEND_RETRY_DELAY = 1.0  # seconds before retrying a network failure (times the attempt number)
MAX_FLOOD_WAIT = 60.0  # a longer retry_after is not waited out; the call fails instead

T = TypeVar("T")


def _contains(exc: TelegramError, *needles: str) -> bool:
    text = exc.message.lower()
    return any(needle in text for needle in needles)


def is_not_modified(exc: TelegramError) -> bool:
    return isinstance(exc, BadRequest) and _contains(exc, "message is not modified")


def is_parse_error(exc: TelegramError) -> bool:
    return isinstance(exc, BadRequest) and _contains(exc, "can't parse", "entit")


def is_edit_target_gone(exc: TelegramError) -> bool:
    return isinstance(exc, BadRequest) and _contains(
        exc, "message to edit not found", "message_id_invalid", "message can't be edited"
    )


async def call_with_retries(
    what: str,
    call: Callable[[], Awaitable[T]],
    retries: int,
    redact: Callable[[BaseException], str],
) -> T:
    """Run one API call, retrying up to `retries` times after flood control (waiting as
    long as Telegram asks, up to MAX_FLOOD_WAIT) or a transient server/network error.

    Never retried: a 400 (the same request would fail again) and a timeout (the message
    may have gone out, and sending it twice is worse than the turn failing).
    """
    attempt = 0
    while True:
        try:
            return await call()
        except RetryAfter as exc:
            wait = retry_after_seconds(exc)
            if attempt >= retries or wait > MAX_FLOOD_WAIT:
                log.warning("Telegram flood control on %s (retry after %.0fs)", what, wait)
                raise
            log.warning(
                "Telegram flood control on %s: waiting %.0fs as asked (retry %d of %d)",
                what,
                wait,
                attempt + 1,
                retries,
            )
            await asyncio.sleep(wait)
        except (BadRequest, TimedOut):
            raise
        except NetworkError as exc:
            if attempt >= retries:
                raise
            delay = SEND_RETRY_DELAY * (attempt + 1)
            log.warning("Telegram %s failed (%s); retrying in %.0fs", what, redact(exc), delay)
            await asyncio.sleep(delay)
        attempt += 1
