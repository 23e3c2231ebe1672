"""Overflow recovery after the provider says "prompt is too long": first compaction (a few
attempts, each keeping fewer turns), then leaving the oldest turns out of the request,
then one pass that shortens oversized tool results in the stored history, then give up and
let the person start over with /reset.

The shortened results are written as a new branch of entries behind a compaction entry that
points at it; the original entries are never rewritten, so the transcript keeps them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from anthropic.types import ToolResultBlockParam

from bot.context.truncation import cap_result_content
from bot.transcript import CONVERSATION_KINDS, Compaction, Entry, Payload, ToolResults

OVERFLOW_COMPACTION_ATTEMPTS = 3
# Compaction attempts plus one cut (older turns left out) and one truncation pass: the most
# times one turn retries a model call after an overflow, so its model calls stay bounded.
MAX_OVERFLOW_RECOVERIES = OVERFLOW_COMPACTION_ATTEMPTS + 2
# Truncation never cuts a result below this, so every result still says what it was.
MIN_TRUNCATED_RESULT_CHARS = 2_000
BRANCH_REASON = "overflow-truncation"
BRANCH_NOTE = (
    "No earlier conversation was summarized. Some tool results below were shortened because "
    "the conversation no longer fit in the model's context window."
)


@dataclass(slots=True)
class OverflowState:
    """How far recovery got within one turn."""

    compactions: int = 0
    compaction_exhausted: bool = False  # nothing left to summarize, or summarizing failed
    cut: bool = False  # older turns were left out of the request
    truncated: bool = False


def _result_sizes(history: list[Entry]) -> list[int]:
    sizes: list[int] = []
    for entry in history:
        if isinstance(entry.payload, ToolResults):
            sizes.extend(_text_chars(block.get("content")) for block in entry.payload.results)
    return sizes


def _text_chars(content: object) -> int:
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        return sum(len(b.get("text", "")) for b in content if b.get("type") == "text")
    return 0


def water_level(sizes: list[int], excess: int, floor: int) -> int | None:
    """The highest per-result cap (at least `floor`) that removes `excess` characters in
    total, cutting the largest results first; `floor` when even that is not enough; None
    when no result is above `floor` (nothing to cut)."""
    if not sizes or max(sizes) <= floor:
        return None
    low, high = floor, max(sizes)
    while low < high:
        middle = (low + high + 1) // 2
        if sum(max(0, s - middle) for s in sizes) >= excess:
            low = middle
        else:
            high = middle - 1
    return low


def truncation_branch(
    history: list[Entry], *, excess_chars: int, tokens_before: int, result_limit: int
) -> list[Entry] | None:
    """New entries that repeat `history` with oversized tool results cut down, followed by a
    compaction entry that makes them the active history. None when nothing can be cut.

    `excess_chars` is measured against what was sent, where no result exceeded
    `result_limit` (the single-result cap), so sizes count up to that limit."""
    previous = history[0].payload if history else None
    if not isinstance(previous, Compaction):
        previous = None
    body = [e for e in history if e.kind in CONVERSATION_KINDS]
    sizes = [min(size, result_limit) for size in _result_sizes(body)]
    cap = water_level(sizes, excess_chars, MIN_TRUNCATED_RESULT_CHARS)
    if cap is None or not body:
        return None
    copies: list[Entry] = []
    parent = body[0].parent_id  # the branch grows from where the original one started
    for entry in body:
        payload: Payload = entry.payload
        if isinstance(payload, ToolResults):
            payload = ToolResults(
                [
                    cast(
                        ToolResultBlockParam,
                        {**b, "content": cap_result_content(b.get("content", ""), cap)},
                    )
                    for b in payload.results
                ]
            )
        copy = Entry(
            entry.session_id,
            payload,
            turn_id=entry.turn_id,
            usage=entry.usage,
            parent_id=parent,
            created_at=entry.created_at,
        )
        copies.append(copy)
        parent = copy.id
    marker = Entry(
        body[0].session_id,
        Compaction(
            summary=previous.summary if previous else BRANCH_NOTE,
            first_kept_entry_id=copies[0].id,
            reason=BRANCH_REASON,
            tokens_before=tokens_before,
            branch_of=body[0].id,
            result_cap_chars=cap,
        ),
        parent_id=parent,
    )
    return [*copies, marker]
