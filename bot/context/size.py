"""How big a session's context is: the last real usage plus an estimate of what came after.

Shared by the pipeline (every request) and compaction (tokens before/after), so both agree.
"""

from __future__ import annotations

from anthropic.types import MessageParam

from bot.context.messages import merge_same_role, rendered_message
from bot.context.tokens import entries_after, find_anchor, messages_tokens
from bot.context.truncation import cap_tool_results
from bot.transcript import Entry


def context_tokens(
    history: list[Entry],
    messages: list[MessageParam],
    *,
    tz: str,
    overhead_chars: int,
    result_limit: int,
) -> int:
    """Tokens of the request `messages` (built from `history`) would make.

    Anchored: the newest assistant entry's real usage covers everything up to it, so only
    the entries after it are estimated (capped as they will be sent; pruning never touches
    them, they belong to the last assistant turn). Without an anchor (a new session, or
    right after compaction) the whole request is estimated, `overhead_chars` included.
    """
    anchor = find_anchor(history)
    if anchor is None:
        return messages_tokens(messages, overhead_chars)
    tail = [m for e in entries_after(history, anchor.entry_id) if (m := rendered_message(e, tz))]
    return anchor.tokens + messages_tokens(cap_tool_results(merge_same_role(tail), result_limit))
