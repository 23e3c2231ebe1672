"""When a memory flush is due and what it asks, as pure functions: the thresholds, the
compaction cycle, the idle lead before the prompt cache expires, and the flush prompt.
(`bot.memory.flush_service` runs one.)

A flush is a silent model call that asks the agent to write durable facts down with
memory_append before they fall out of context.

It runs (a) before compaction: when a person's turn would take the context past
window - reserve - soft threshold, and from the compaction hooks (also on the overflow
path), at most once per compaction cycle; (b) from the scheduler, shortly before an idle
session's prompt cache expires; (c) before `/reset` and `/new`.
"""

from __future__ import annotations

import datetime as dt
from enum import StrEnum

from anthropic.types import MessageParam

from bot.config import Config
from bot.context.blocks import content_blocks, make_message, text_block
from bot.sessions.window import session_limits
from bot.store.base import SessionRow


class Reason(StrEnum):
    THRESHOLD = "threshold"  # a person's turn is about to cross the compaction threshold
    COMPACTION = "compaction"  # compaction (or overflow recovery) is about to run
    IDLE = "idle"  # the scheduler, before an idle session's cache expires
    RESET = "reset"  # /reset or /new


# Flushes that belong to a compaction cycle and mark it done.
CYCLE_REASONS = frozenset({Reason.THRESHOLD, Reason.COMPACTION})

WHY = {
    Reason.THRESHOLD: "This conversation is close to being compacted; older details will be "
    "replaced by a summary.",
    Reason.COMPACTION: "This conversation is being compacted now; older details will be "
    "replaced by a summary.",
    Reason.IDLE: "The conversation has gone quiet; its details will soon leave your context.",
    Reason.RESET: "This session is being reset; its history will no longer be in context.",
}

FLUSH_PROMPT = (
    "[Memory flush: a housekeeping turn, nobody sees your reply] {why} Store what is worth "
    "keeping from this conversation with memory_append: facts, preferences, decisions, "
    'promises and open to-dos that are not in memory yet. Use file="daily" (today\'s note '
    "of this conversation, {note}) for what happened{curated}. Append only what is new, "
    "never store secrets, and do not answer earlier messages here. Then reply with exactly "
    "NO_REPLY.\n"
    "Current time: {now}"
)
CURATED_ADMIN = ' and file="MEMORY.md" for lasting facts about the people you help'


def flush_threshold(context_window: int, reserve_tokens: int, soft_threshold: int) -> int:
    """Context size at which the pre-compaction flush runs."""
    return max(0, context_window - reserve_tokens - soft_threshold)


def session_flush_threshold(config: Config, session: SessionRow) -> int:
    """The flush threshold of `session`: on its effective window (its model's, or the
    smaller one the provider named), so the flush comes before the compaction it precedes."""
    return flush_threshold(
        session_limits(config, session).window,
        config.context.reserve,
        config.memory.flush.soft_threshold_tokens,
    )


def flushed_this_cycle(session: SessionRow) -> bool:
    """A flush already ran for the current compaction cycle.

    `memory_flush_compaction_count` is None until the first cycle flush, so a new session
    (compaction_count 0) is never mistaken for a flushed one.
    """
    done = session.memory_flush_compaction_count
    return done is not None and done == session.compaction_count


def has_unflushed_conversation(session: SessionRow) -> bool:
    """Someone talked in this session after its last successful flush."""
    if session.turns == 0 or session.last_activity_at is None:
        return False
    return session.memory_flush_at is None or session.memory_flush_at < session.last_activity_at


def threshold_flush_due(session: SessionRow, projected_tokens: int, threshold: int) -> bool:
    return projected_tokens >= threshold and not flushed_this_cycle(session)


def compaction_flush_due(session: SessionRow) -> bool:
    return not flushed_this_cycle(session) and has_unflushed_conversation(session)


def idle_flush_at(session: SessionRow, ttl_seconds: float, lead_seconds: float) -> float | None:
    """When the scheduler should flush this session: `lead` before its cache expires, or
    None when there is nothing to flush."""
    if not has_unflushed_conversation(session) or session.last_model_call_at is None:
        return None
    return session.last_model_call_at + max(0.0, ttl_seconds - lead_seconds)


def flush_prompt(reason: Reason, now: dt.datetime, *, note: str, curated: bool) -> str:
    """The flush's request; `note` is the scope's daily note, and only an admin's DM
    (`curated`) is offered MEMORY.md."""
    return FLUSH_PROMPT.format(
        why=WHY[reason],
        note=note,
        curated=CURATED_ADMIN if curated else "",
        now=now.strftime("%Y-%m-%d %H:%M %Z"),
    )


def with_flush_prompt(messages: list[MessageParam], prompt: str) -> list[MessageParam]:
    """The history's messages with the flush prompt as the final user content."""
    block = text_block(prompt)
    if messages and messages[-1]["role"] == "user":
        last = messages[-1]
        return [*messages[:-1], make_message("user", [*content_blocks(last), block])]
    return [*messages, make_message("user", [block])]
