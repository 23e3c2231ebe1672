"""Make an inbound message safe to record and to send on, whatever a platform (or a forger
with a valid signature) put in it.

Two things no real client produces but a crafted payload can: lone UTF-16 surrogates (valid
JSON escapes that SQLite and the model API both refuse, so the message could never be
recorded and the platform would retry it forever) and text far beyond any platform's own
limit. Both get a defined, visible form instead of an error.
"""

from __future__ import annotations

import dataclasses
import re
from enum import Enum
from typing import Any

from bot.types import InboundMessage

# Five times Slack's own ceiling for a message (Telegram's is 4,096): room for a long paste
# in the local chat, while one message stays near a quarter of the default context window
# instead of filling it on every later turn.
MAX_MESSAGE_CHARS = 200_000
TRUNCATION_NOTE = "\n[message cut: it had {total:,} characters; only the first {kept:,} are kept]"
REPLACEMENT = "\ufffd"

_SURROGATE_RE = re.compile("[\ud800-\udfff]")


def clean_text(text: str) -> str:
    """`text` with every lone surrogate replaced by U+FFFD (a Python str never holds a valid
    surrogate pair: JSON decoding already joined those into one code point)."""
    return _SURROGATE_RE.sub(REPLACEMENT, text)


def _clean(value: Any) -> Any:
    if isinstance(value, Enum):  # e.g. ChatType, a str subclass that must stay itself
        return value
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, dict):
        return {_clean(k): _clean(v) for k, v in value.items()}
    return value


def cap_text(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """`text`, cut to `limit` characters with a note saying how long it was."""
    if len(text) <= limit:
        return text
    return text[:limit] + TRUNCATION_NOTE.format(total=len(text), kept=limit)


def sanitize_inbound(msg: InboundMessage) -> InboundMessage:
    """`msg` with every string field (and its address's) cleaned and its text capped."""
    cleaned = {
        field.name: _clean(value)
        for field in dataclasses.fields(msg)
        if isinstance(value := getattr(msg, field.name), str | list | dict)
    }
    address = msg.address
    where = {f.name: _clean(getattr(address, f.name)) for f in dataclasses.fields(address)}
    cleaned["address"] = dataclasses.replace(address, **where)
    cleaned["text"] = cap_text(cleaned["text"])
    return dataclasses.replace(msg, **cleaned)
