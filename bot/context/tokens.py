"""Token accounting for context decisions: chars/4 with a 1.2 safety margin, anchored on the
last real `usage` the API returned so estimates do not drift over a long session.

Latin text runs about four characters a token; Chinese, Japanese, Korean and the other
non-Latin scripts run about one, so those characters count as four (`text_units`).

Estimates only decide *when* to prune or compact; the provider's counts stay the truth.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from anthropic.types import MessageParam

from bot.context.media import parse_link
from bot.transcript import AssistantReply, Compaction, Entry

CHARS_PER_TOKEN = 4
SAFETY_MARGIN = 1.2
# Images are billed by pixel size, not characters (width x height / 750); this is roughly a
# 1,000x1,000 picture, for images and documents whose size is not known here.
IMAGE_TOKENS = 1_600
# Characters past Latin and its diacritics (Greek, Cyrillic, Arabic, Indic, CJK, emoji...):
# tokenizers spend about a token on each, not a quarter.
DENSE_SCRIPT_RE = re.compile(r"[^\u0000-\u036f\u2000-\u206f]")


def text_units(text: str) -> int:
    """`text`'s size in Latin-equivalent characters: its length, with every character of a
    dense script counted `CHARS_PER_TOKEN` times, so chars/4 estimates hold for any script."""
    if text.isascii():
        return len(text)
    return len(text) + (CHARS_PER_TOKEN - 1) * len(DENSE_SCRIPT_RE.findall(text))


def tokens_for_chars(chars: int) -> int:
    """Estimated tokens for `chars` characters, including the safety margin."""
    return math.ceil(chars / CHARS_PER_TOKEN * SAFETY_MARGIN)


def plain_tokens_for_chars(chars: int) -> int:
    """chars/4 without the margin: used when subtracting removed text, so an estimate errs
    on the high side rather than hiding an overflow."""
    return chars // CHARS_PER_TOKEN


def _content_chars(content: Any) -> tuple[int, int]:
    """(characters, image tokens) of a message or tool_result content."""
    if isinstance(content, str):
        return text_units(content), 0
    chars = images = 0
    for block in content or []:
        c, i = block_size(block)
        chars += c
        images += i
    return chars, images


def block_size(block: Mapping[str, Any]) -> tuple[int, int]:
    """(characters, image tokens) of one content block, counting what the model reads."""
    kind = block.get("type")
    if kind == "text":
        return text_units(block.get("text", "")), 0
    if kind in ("image", "document"):
        link = parse_link(block)
        return 0, (link.tokens if link is not None and link.tokens else IMAGE_TOKENS)
    if kind == "tool_use":
        raw = json.dumps(block.get("input", {}), ensure_ascii=False)
        return len(block.get("name", "")) + text_units(raw), 0
    if kind == "tool_result":
        return _content_chars(block.get("content"))
    if kind == "thinking":
        return text_units(block.get("thinking", "")), 0
    return text_units(json.dumps(block, ensure_ascii=False)), 0


def messages_tokens(messages: Iterable[MessageParam], overhead_chars: int = 0) -> int:
    """Unanchored estimate of API messages plus `overhead_chars` (system prompt, tools)."""
    chars = overhead_chars
    images = 0
    for message in messages:
        c, i = _content_chars(message.get("content"))
        chars += c
        images += i
    return tokens_for_chars(chars) + images


@dataclass(frozen=True, slots=True)
class Anchor:
    """The last model call's real size: everything up to and including `entry_id`."""

    entry_id: str
    tokens: int  # prompt (uncached + cache read + cache write) + output tokens


def find_anchor(history: list[Entry]) -> Anchor | None:
    """The newest assistant entry with usage, unless a compaction came after it (then the
    usage describes a context that no longer exists)."""
    newest_compaction = max(
        (e.seq for e in history if isinstance(e.payload, Compaction)), default=-1
    )
    for entry in reversed(history):
        if not isinstance(entry.payload, AssistantReply) or entry.usage is None:
            continue
        if entry.seq <= newest_compaction:
            return None
        tokens = entry.usage.prompt_tokens + entry.usage.output_tokens
        return Anchor(entry.id, tokens) if tokens else None
    return None


def entries_after(history: list[Entry], entry_id: str) -> list[Entry]:
    for index, entry in enumerate(history):
        if entry.id == entry_id:
            return history[index + 1 :]
    return []
