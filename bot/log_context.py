"""What log lines say about where they come from, and what they may quote.

A turn binds its id and session key once (`turn_context`); every line logged while it runs,
in any module and any task it starts, carries them, so no message formats them by hand.
Message bodies are passed as `Content(text)`; `logs.ContentFilter` hides them unless the
operator set `logging.include_content`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from contextvars import ContextVar

_turn_id: ContextVar[str | None] = ContextVar("krill_turn_id", default=None)
_session_key: ContextVar[str | None] = ContextVar("krill_session_key", default=None)


@contextlib.contextmanager
def turn_context(turn_id: str, session_key: str) -> Iterator[None]:
    """Lines logged inside carry `turn_id` and `session_key` (tasks started here inherit it)."""
    turn_token = _turn_id.set(turn_id)
    key_token = _session_key.set(session_key)
    try:
        yield
    finally:
        _session_key.reset(key_token)
        _turn_id.reset(turn_token)


class TurnContextFilter(logging.Filter):
    """Copies the current turn's id and session key onto each record (None outside turns)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.turn_id = _turn_id.get()
        record.session_key = _session_key.get()
        return True


class Content(str):
    """A person's or the model's words in a log call's arguments: shown only when
    `logging.include_content` is true, else replaced by their length."""

    def hidden(self) -> str:
        return f"<{len(self)} chars>"
