"""A session's transcript as HTML: one `transcript-entry` per typed entry (person turns with
their files, Krill's own prompts, replies with their tool calls, tool results collapsed when
long, compaction summaries, flushes, resets and commands), oldest first."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping
from typing import Any

from markupsafe import Markup

from bot.console.layout import count, join, when
from bot.console.media_view import render_media
from bot.transcript import (
    AssistantReply,
    Command,
    Compaction,
    Entry,
    InternalPrompt,
    MemoryFlushRecord,
    PersonTurn,
    Reset,
    ToolResults,
)

# Tool results and inputs longer than this start collapsed.
COLLAPSE_CHARS = 400


def _text(value: str) -> Markup:
    return Markup('<div class="text">{}</div>').format(value)


def _collapsible(label: str, body: str) -> Markup:
    if len(body) <= COLLAPSE_CHARS:
        return Markup('<div class="block"><span class="label">{}</span>{}</div>').format(
            label, _text(body)
        )
    return Markup("<details class=block><summary>{} ({} chars)</summary>{}</details>").format(
        label, count(len(body)), _text(body)
    )


def _result_text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(b.get("text", ""))
            if isinstance(b, Mapping) and b.get("type") == "text"
            else f"[{b.get('type', 'block') if isinstance(b, Mapping) else 'block'}]"
            for b in content
        )
    return json.dumps(content, ensure_ascii=False)


def _blocks(blocks: Iterable[Mapping[str, Any]]) -> Markup:
    parts = []
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            parts.append(_text(str(block.get("text", ""))))
        elif kind == "tool_use":
            raw = json.dumps(block.get("input"), ensure_ascii=False, indent=1)
            parts.append(_collapsible(f"tool call {block.get('name', '')}", raw))
        elif kind == "tool_result":
            label = "tool result" + (" (error)" if block.get("is_error") else "")
            parts.append(_collapsible(label, _result_text(block.get("content"))))
        elif kind in ("image", "document"):
            parts.append(
                Markup('<div class="block"><span class="label">[{}]</span></div>').format(kind)
            )
    return join(parts)


def _body(entry: Entry) -> tuple[str, Markup]:
    """(the entry's heading, its HTML body)."""
    match entry.payload:
        case PersonTurn(messages=messages, context_lines=context):
            lines = join(
                Markup("<p><b>{}</b> {}</p>{}").format(
                    m.user_name or m.user_id, m.text, render_media(m.media, entry.session_id)
                )
                for m in messages
            )
            if context:
                lines += _collapsible("context", "\n".join(context))
            return "person", lines
        case InternalPrompt(text=text, purpose=purpose):
            return f"internal prompt ({purpose})", _collapsible("prompt", text)
        case AssistantReply(content=content):
            return "reply", _blocks(content)
        case ToolResults(results=results):
            return "tool results", _blocks(results)
        case Compaction(summary=summary, reason=reason, tokens_before=before, tokens_after=after):
            head = f"compaction ({reason}; {count(before)} → {count(after)} tokens)"
            return head, _text(summary)
        case MemoryFlushRecord(reason=reason, ok=ok, appended=appended, error=error):
            outcome = f"{appended} note(s) appended" if ok else f"failed: {error}"
            return "memory flush", _text(f"{reason}: {outcome}")
        case Reset(reason=reason, next_session_id=next_id):
            return "reset", _text(f"{reason}; continues in session {next_id}")
        case Command(name=name, args=args, principal=principal):
            return "command", _text(f"/{name} {args}".rstrip() + f" by {principal}")
    return str(entry.kind), Markup("")


def render_entries(entries: Iterable[Entry], zone: dt.tzinfo) -> Markup:
    items = []
    for entry in entries:
        heading, body = _body(entry)
        usage = entry.usage
        tokens = (
            f" · {count(usage.prompt_tokens)} in / {count(usage.output_tokens)} out"
            if usage
            else ""
        )
        items.append(
            Markup(
                '<li class="entry {kind}" data-testid="transcript-entry" data-kind="{kind}">'
                '<div class="meta"><span class="kind">{heading}</span> <time>{at}</time>'
                "{tokens}</div>{body}</li>"
            ).format(
                kind=entry.kind,
                heading=heading,
                at=when(entry.created_at, zone),
                tokens=tokens,
                body=body,
            )
        )
    if not items:
        return Markup("<p>This session has no entries yet.</p>")
    return Markup('<ol class="transcript">{}</ol>').format(join(items))
