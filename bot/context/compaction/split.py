"""Where a compaction cuts the history: what is summarized and which latest turns are kept.

A cut lands on a person's turn, so a kept turn keeps its tool calls and results; only when
even the latest turn alone is too big (one request, dozens of tool calls) is it cut inside,
before one of its tool rounds, so each call still stays with its result.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.context.messages import build_messages, entry_to_message
from bot.context.tokens import messages_tokens
from bot.context.truncation import cap_tool_results
from bot.transcript import (
    CONVERSATION_KINDS,
    AssistantReply,
    Compaction,
    Entry,
    ToolResults,
    is_person_turn,
)


@dataclass(frozen=True, slots=True)
class Split:
    previous: Compaction | None  # the compaction whose summary is folded into the new one
    summarize: list[Entry]
    kept: list[Entry]


def split_history(history: list[Entry], keep_turns: int) -> Split:
    """Cut on a person-turn boundary: the last `keep_turns` turns are kept verbatim (with
    their tool calls and results, which always follow their turn's user entry)."""
    previous = history[0].payload if history else None
    if not isinstance(previous, Compaction):
        previous = None
    body = [e for e in history if e.kind in CONVERSATION_KINDS]
    starts = [i for i, e in enumerate(body) if is_person_turn(e)]
    if len(starts) <= keep_turns:
        return Split(previous, [], body)
    cut = starts[-keep_turns]
    return Split(previous, body[:cut], body[cut:])


def choose_split(
    history: list[Entry], *, keep_turns: int, budget_tokens: int, tz: str, result_limit: int
) -> Split:
    """The split keeping the most turns (up to `keep_turns`) whose kept part fits
    `budget_tokens`; when not even one turn fits, the latest turn cut inside."""
    for keep in range(keep_turns, 0, -1):
        candidate = split_history(history, keep)
        if _kept_tokens(candidate.kept, tz, result_limit) <= budget_tokens:
            return candidate
    return split_inside_turn(
        split_history(history, 1), budget_tokens=budget_tokens, tz=tz, result_limit=result_limit
    )


def split_inside_turn(split: Split, *, budget_tokens: int, tz: str, result_limit: int) -> Split:
    """`split` with its one kept turn cut before a tool round (an assistant reply following
    tool results): the earliest round whose remainder fits `budget_tokens`, else the last
    round. The calls and results of a round stay together on one side. Unchanged when the
    turn has no such round."""
    kept = split.kept
    rounds = [
        i
        for i in range(1, len(kept))
        if isinstance(kept[i].payload, AssistantReply)
        and isinstance(kept[i - 1].payload, ToolResults)
    ]
    if not rounds:
        return split
    sizes = [_entry_tokens(e, tz, result_limit) for e in kept]
    remainder = [sum(sizes[i:]) for i in range(len(kept) + 1)]
    cut = next((i for i in rounds if remainder[i] <= budget_tokens), rounds[-1])
    return Split(split.previous, [*split.summarize, *kept[:cut]], kept[cut:])


def _kept_tokens(kept: list[Entry], tz: str, result_limit: int) -> int:
    return messages_tokens(cap_tool_results(build_messages(kept, tz), result_limit))


def _entry_tokens(entry: Entry, tz: str, result_limit: int) -> int:
    message = entry_to_message(entry, tz)
    return messages_tokens(cap_tool_results([message], result_limit)) if message else 0
