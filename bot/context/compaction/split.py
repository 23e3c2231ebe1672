"""Where a compaction cuts the history: what is summarized and which latest turns are kept.

A cut always lands on a person's turn, so a kept turn keeps its tool calls and results.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.context.messages import build_messages
from bot.context.tokens import messages_tokens
from bot.context.truncation import cap_tool_results
from bot.transcript import CONVERSATION_KINDS, Compaction, Entry, is_person_turn


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
    """The split keeping the most turns (up to `keep_turns`, at least one) whose kept part
    fits `budget_tokens`."""
    split = split_history(history, 1)
    for keep in range(keep_turns, 0, -1):
        candidate = split_history(history, keep)
        if keep == 1 or _kept_tokens(candidate.kept, tz, result_limit) <= budget_tokens:
            split = candidate
            break
    return split


def _kept_tokens(kept: list[Entry], tz: str, result_limit: int) -> int:
    return messages_tokens(cap_tool_results(build_messages(kept, tz), result_limit))
