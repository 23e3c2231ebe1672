"""How `krill sessions export` and `krill sessions show` present transcript entries: one JSON
record per entry, or one readable line per entry."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from typing import Any

from bot.transcript import (
    AssistantReply,
    Compaction,
    Entry,
    InternalPrompt,
    PersonTurn,
    ToolResults,
    to_payload,
)

SUMMARY_PREVIEW_CHARS = 300
INPUT_PREVIEW_CHARS = 200


def entry_record(entry: Entry) -> dict[str, Any]:
    """The JSONL export form: the entry's fields, its kind and its payload as stored."""
    return {
        "id": entry.id,
        "parent_id": entry.parent_id,
        "session_id": entry.session_id,
        "kind": str(entry.kind),
        "turn_id": entry.turn_id,
        "created_at": entry.created_at,
        "usage": entry.usage.to_dict() if entry.usage else None,
        "payload": to_payload(entry.payload),
    }


def entry_line(entry: Entry) -> str:
    """One line for a person reading the transcript in a terminal."""
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(entry.created_at))
    match entry.payload:
        case Compaction(summary=summary, first_kept_entry_id=first_kept):
            preview = summary[:SUMMARY_PREVIEW_CHARS]
            return f"{when} [compaction] kept from {first_kept}: {preview}"
        case PersonTurn(messages=messages):
            text = " | ".join(f"{m.user_name or m.user_id}: {m.text}" for m in messages)
            return f"{when} user: {text}"
        case InternalPrompt(text=text):
            return f"{when} user: {text}"
        case AssistantReply(content=content):
            return f"{when} assistant: {_blocks_text(content)}"
        case ToolResults(results=results):
            return f"{when} tool: {_blocks_text(results)}"
    payload = json.dumps(to_payload(entry.payload), ensure_ascii=False)
    return f"{when} [{entry.kind}] {payload[:SUMMARY_PREVIEW_CHARS]}"


def _blocks_text(blocks: Iterable[Mapping[str, Any]]) -> str:
    parts = []
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            parts.append(block["text"])
        elif kind == "tool_use":
            raw = json.dumps(block.get("input"))[:INPUT_PREVIEW_CHARS]
            parts.append(f"[tool {block['name']} {raw}]")
        elif kind == "tool_result":
            content = block.get("content")
            size = len(content) if isinstance(content, str) else len(json.dumps(content))
            parts.append(f"[result {size} chars{' error' if block.get('is_error') else ''}]")
    return " ".join(parts)
