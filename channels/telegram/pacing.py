"""Telegram's flood limits as python-telegram-bot's rate limiter: every call that puts a
message in a chat (sendMessage, editMessageText, ...) waits for a slot per chat, per group
and overall (`[telegram.pacing]`), so Krill does not provoke a 429.

It is plugged in through PTB's `BaseRateLimiter` extension point rather than PTB's
`AIORateLimiter`, which has no per-chat limit (a private chat gets 1 message a second too)
and counts at acquire time (see `channels.pacing`). Like `AIORateLimiter(max_retries=0)`, it
never retries: a 429 that still happens surfaces as `RetryAfter` to whoever owns retries.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Hashable
from typing import Any

from telegram.ext import BaseRateLimiter

from channels.pacing import Limit, Window, paced
from channels.telegram.config import TelegramPacing

# Pass as `rate_limit_args` for a streaming preview: skipped, never waited for.
PREVIEW = "preview"
OVERALL = "overall"
# Calls that do not put a message in a chat and so are not flood-limited.
UNPACED = frozenset({"sendChatAction", "setMessageReaction", "answerCallbackQuery"})
PACED_PREFIXES = ("send", "edit", "copyMessage", "forwardMessage")

JSON = bool | dict[str, Any] | list[dict[str, Any]]


def _is_group(chat_id: object) -> bool:
    """Group and supergroup ids are negative; an @username names a channel or supergroup."""
    return isinstance(chat_id, str) or (isinstance(chat_id, int) and chat_id < 0)


class FloodPacer(BaseRateLimiter[str]):
    def __init__(self, pacing: TelegramPacing):
        self._chat = Window(Limit(1, pacing.chat_interval))
        self._group = Window(Limit(pacing.group_messages, pacing.group_period))
        self._overall = Window(Limit(pacing.overall_per_second, 1.0))

    async def initialize(self) -> None:
        return None

    async def shutdown(self) -> None:
        return None

    def windows(self, endpoint: str, data: dict[str, Any]) -> list[tuple[Window, Hashable]]:
        """The windows a call to `endpoint` counts in (none for calls that send nothing)."""
        chat_id = data.get("chat_id")
        if chat_id is None or endpoint in UNPACED or not endpoint.startswith(PACED_PREFIXES):
            return []
        try:
            chat_id = int(chat_id)
        except (TypeError, ValueError):
            pass  # an @username
        windows: list[tuple[Window, Hashable]] = [(self._chat, chat_id)]
        if _is_group(chat_id):
            windows.append((self._group, chat_id))
        windows.append((self._overall, OVERALL))
        return windows

    async def process_request(
        self,
        callback: Callable[..., Coroutine[Any, Any, JSON]],
        args: Any,
        kwargs: dict[str, Any],
        endpoint: str,
        data: dict[str, Any],
        rate_limit_args: str | None,
    ) -> JSON:
        async with paced(self.windows(endpoint, data), wait=rate_limit_args != PREVIEW):
            return await callback(*args, **kwargs)
