"""When compaction cannot run (it failed, timed out, or the breaker paused it) a request
must still fit the window: after the old tool results are shortened, the oldest turns
beyond the kept ones are left out of the request, and the request says so.

The cut lands on a person's turn and is kept in the context plan, so the requests after it
repeat the same prefix until the context outgrows the window again (then the cut moves) or
a compaction succeeds (then the plan starts over). Only requests change: the transcript
keeps everything.
"""

from __future__ import annotations

from anthropic.types import MessageParam

from bot.context.blocks import make_message, text_block
from bot.context.compaction.split import split_history
from bot.context.messages import build_messages
from bot.context.tokens import messages_tokens
from bot.context.tool_pairing import merge_same_role
from bot.context.truncation import cap_tool_results
from bot.transcript import CONVERSATION_KINDS, Compaction, Entry

CUT_NOTE = (
    "[{count} earlier message(s) of this conversation are left out of this request: it "
    "outgrew the context window and could not be summarized just now. If something from "
    "before matters, ask the person.]"
)


def cut_point(
    history: list[Entry],
    *,
    current: str | None,
    keep_turns: int,
    budget_tokens: int,
    tz: str,
    result_limit: int,
) -> str | None:
    """The entry the request should start at: the most recent turns (at most `keep_turns`,
    at least one) whose messages fit `budget_tokens`, never earlier than the `current` cut.
    None when no turn beyond the kept ones is left to leave out."""
    body = [e for e in history if e.kind in CONVERSATION_KINDS]
    start = next((i for i, e in enumerate(body) if e.id == current), 0)
    remaining = body[start:]
    choice = None
    for keep in range(keep_turns, 0, -1):
        split = split_history(remaining, keep)
        if not split.summarize:
            continue
        choice = split.kept[0].id
        kept = cap_tool_results(build_messages(split.kept, tz), result_limit)
        if messages_tokens(kept) <= budget_tokens:
            return choice
    return choice


def cut_messages(history: list[Entry], cut_id: str, tz: str) -> list[MessageParam] | None:
    """The request's messages with everything before `cut_id` left out (the last summary
    stays), opening with a note saying how much; None when `cut_id` is not in `history`."""
    body = [e for e in history if e.kind in CONVERSATION_KINDS]
    index = next((i for i, e in enumerate(body) if e.id == cut_id), None)
    if index is None:
        return None
    summary = [history[0]] if history and isinstance(history[0].payload, Compaction) else []
    left_out = len(build_messages(body[:index], tz)) if index else 0
    note = make_message("user", [text_block(CUT_NOTE.format(count=left_out))])
    return merge_same_role([note, *build_messages([*summary, *body[index:]], tz)])
