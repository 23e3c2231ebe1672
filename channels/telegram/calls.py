"""Bot API calls that may fail: what Telegram's errors mean, for the adapter's fallbacks
and for the outbox (which owns retries: a call is tried once here)."""

from __future__ import annotations

from collections.abc import Callable

import httpx
from telegram.error import BadRequest, Forbidden, RetryAfter, TelegramError, TimedOut

from bot.channel_contract import SendFailure, SendFailureKind
from channels.telegram.polling import retry_after_seconds


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


def unconfirmed(exc: TelegramError, wait: float) -> SendFailure | None:
    """For a send that got no answer within the read timeout `wait`: its request reached
    Telegram, which may well have carried it out, so the outcome is unknown (settled after
    waiting as long again). None for any other error: a connect, pool or write timeout means
    the request never arrived whole."""
    if isinstance(exc, TimedOut) and isinstance(exc.__cause__, httpx.ReadTimeout):
        return SendFailure(
            SendFailureKind.UNKNOWN, f"Telegram did not answer within {wait:g}s", wait
        )
    return None


def classify(exc: TelegramError, redact: Callable[[BaseException], str]) -> SendFailure:
    """What a failed call means for the outbox: flood control names its delay; a refusal
    (bot blocked, chat not found, an upload over Telegram's size limit) is permanent; a text
    too long is to be split; a timeout, a server error or the network is transient (a send
    whose answer timed out is `unconfirmed` first)."""
    if isinstance(exc, RetryAfter):
        return SendFailure(
            SendFailureKind.RETRY_AFTER, "Telegram flood control", retry_after_seconds(exc)
        )
    if isinstance(exc, BadRequest) and _contains(exc, "message is too long"):
        return SendFailure(SendFailureKind.TOO_LONG, exc.message)
    if isinstance(exc, Forbidden | BadRequest) or _contains(exc, "request entity too large"):
        return SendFailure(SendFailureKind.PERMANENT, exc.message)
    return SendFailure(SendFailureKind.TRANSIENT, redact(exc))
