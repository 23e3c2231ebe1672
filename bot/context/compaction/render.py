"""The summarized part of the history as the plain labelled transcript the summarizer reads.

No untrusted markers or metadata inside (the whole transcript is quoted once), internal
turns (memory flush, heartbeat) left out as housekeeping, long tool results cut to head and
tail as cache-TTL pruning leaves old ones.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from anthropic.types import ContentBlockParam, ToolResultBlockParam

from bot.config import ContextConfig
from bot.context.compaction.split import Split
from bot.context.messages import format_time
from bot.context.pruning import trim_text
from bot.context.tokens import text_units, tokens_for_chars
from bot.context.truncation import cut_head
from bot.transcript import (
    AssistantReply,
    InternalPrompt,
    MediaForm,
    MediaRef,
    PersonTurn,
    ToolResults,
)
from bot.untrusted import wrap_untrusted

TOOL_INPUT_PREVIEW_CHARS = 500


@dataclass(frozen=True, slots=True)
class Item:
    """One message of the transcript the summarizer reads."""

    role: Literal["summary", "user", "assistant", "tool"]
    text: str
    ask: str = ""  # for user items: what the person wrote, without names and times
    calls: str = ""  # for assistant items: the tool calls it made, as `text` shows them
    tool: str = ""
    is_error: bool = False
    omitted: bool = False  # a note standing in for a message too large to summarize

    @property
    def tokens(self) -> int:
        return tokens_for_chars(text_units(self.text))

    @property
    def label(self) -> str:
        return {
            "summary": "earlier summary",
            "user": "user",
            "assistant": "assistant",
            "tool": "tool result",
        }[self.role]


def _result_text(block: ToolResultBlockParam) -> str:
    """The result's text, with a `[kind]` placeholder for anything that is not text."""
    content = block.get("content", "")
    if isinstance(content, str):
        return content
    return "\n".join(b["text"] if b["type"] == "text" else f"[{b['type']}]" for b in content)


def _assistant_item(content: Iterable[ContentBlockParam], names: dict[str, str]) -> Item | None:
    """What the assistant said and which tools it called (recording call names in `names`)."""
    parts, calls = [], []
    for block in content:
        if block["type"] == "text" and block["text"]:
            parts.append(block["text"])
        elif block["type"] == "tool_use":
            names[block["id"]] = block["name"]
            raw = json.dumps(block.get("input", {}), ensure_ascii=False)
            call = f"[called {block['name']} {cut_head(raw, TOOL_INPUT_PREVIEW_CHARS)}]"
            parts.append(call)
            calls.append(call)
    return Item("assistant", "\n".join(parts), calls="\n".join(calls)) if parts else None


def _tool_items(
    results: Iterable[ToolResultBlockParam], names: dict[str, str], config: ContextConfig
) -> list[Item]:
    """One item per result: long ones as head and tail, the way cache-TTL pruning leaves
    old results (the assistant already drew its conclusions from them)."""
    items = []
    for block in results:
        name = names.get(block["tool_use_id"], "tool")
        failed = bool(block.get("is_error"))
        head = f"[{name} {'failed' if failed else 'returned'}]"
        text = _result_text(block)
        if len(text) > config.prune_soft_trim_min_chars:
            text = trim_text(text, config.prune_head_chars, config.prune_tail_chars)
        items.append(Item("tool", f"{head}\n{text}", tool=name, is_error=failed))
    return items


def render_items(split: Split, tz: str, config: ContextConfig) -> list[Item]:
    """The summarized part as labelled items, the previous summary first."""
    items: list[Item] = []
    if split.previous is not None:
        items.append(Item("summary", split.previous.summary))
    internal = {
        e.turn_id for e in split.summarize if isinstance(e.payload, InternalPrompt) and e.turn_id
    }
    names: dict[str, str] = {}
    for entry in split.summarize:
        payload = entry.payload
        if entry.turn_id in internal or isinstance(payload, InternalPrompt):
            continue
        if isinstance(payload, PersonTurn):
            lines = [f"(earlier chat) {line}" for line in payload.context_lines]
            asks = []
            for msg in payload.messages:
                sender = msg.user_name or msg.user_id
                when = format_time(msg.timestamp, tz)
                lines.append(f"[{when}] {sender}: {msg.text}")
                # What images showed reaches a summary only through what was said of them.
                lines.extend(_media_line(ref) for ref in msg.media)
                asks.append(msg.text)
            items.append(Item("user", "\n".join(lines), ask="\n".join(asks)))
        elif isinstance(payload, AssistantReply):
            item = _assistant_item(payload.content, names)
            if item is not None:
                items.append(item)
        elif isinstance(payload, ToolResults):
            items.extend(_tool_items(payload.results, names, config))
    return items


def _media_line(ref: MediaRef) -> str:
    if ref.form == MediaForm.TRANSCRIPT:
        return f"  (voice note, transcribed) {ref.text}"
    return f"  (sent a file: {ref.name}, {ref.form})"


def transcript_text(items: Sequence[Item], marker: str) -> str:
    body = "\n\n".join(f"### {item.label}\n{item.text}" for item in items)
    return wrap_untrusted(body, source="transcript", marker_id=marker)
