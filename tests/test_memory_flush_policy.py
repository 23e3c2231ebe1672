"""Tests for bot.memory.flush_policy: when a flush is due (thresholds, the compaction cycle,
idle timing) and what its prompt asks."""

from __future__ import annotations

import datetime as dt
from typing import Any

from bot.memory.flush_policy import (
    Reason,
    compaction_flush_due,
    flush_prompt,
    flush_threshold,
    flushed_this_cycle,
    has_unflushed_conversation,
    idle_flush_at,
    threshold_flush_due,
    with_flush_prompt,
)
from bot.store.base import SessionRow

DM_KEY = "agent:main:local:direct:alice"


def session(**fields: Any) -> SessionRow:
    base: dict[str, Any] = {
        "session_id": "s1",
        "session_key": DM_KEY,
        "is_current": True,
        "created_at": 0.0,
        "updated_at": 0.0,
    }
    return SessionRow(**(base | fields))


def test_first_flush_of_a_new_session_is_not_skipped() -> None:
    fresh = session(compaction_count=0, memory_flush_compaction_count=None)
    assert not flushed_this_cycle(fresh)
    assert threshold_flush_due(fresh, projected_tokens=180_000, threshold=176_000)
    done = session(compaction_count=0, memory_flush_compaction_count=0)
    assert flushed_this_cycle(done)
    assert not threshold_flush_due(done, projected_tokens=190_000, threshold=176_000)
    next_cycle = session(compaction_count=1, memory_flush_compaction_count=0)
    assert threshold_flush_due(next_cycle, projected_tokens=180_000, threshold=176_000)
    assert not threshold_flush_due(fresh, projected_tokens=175_999, threshold=176_000)
    assert flush_threshold(200_000, 20_000, 4_000) == 176_000
    assert flush_threshold(30_000, 20_000, 40_000) == 0


def test_unflushed_conversation_and_idle_timing() -> None:
    assert not has_unflushed_conversation(session(turns=0, last_activity_at=10.0))
    talked = session(turns=2, last_activity_at=100.0, last_model_call_at=105.0)
    assert has_unflushed_conversation(talked)
    assert idle_flush_at(talked, ttl_seconds=300, lead_seconds=30) == 375.0
    flushed = session(turns=2, last_activity_at=100.0, memory_flush_at=110.0)
    assert not has_unflushed_conversation(flushed) and idle_flush_at(flushed, 300, 30) is None
    assert compaction_flush_due(talked)
    assert not compaction_flush_due(
        session(turns=2, last_activity_at=100.0, memory_flush_compaction_count=0)
    )


def test_prompt_names_today_and_hides_memory_md_in_groups() -> None:
    now = dt.datetime(2025, 3, 14, 9, 30, tzinfo=dt.UTC)
    dm = flush_prompt(Reason.IDLE, now, is_direct=True)
    assert "memory/2025-03-14.md" in dm and "NO_REPLY" in dm and 'file="MEMORY.md"' in dm
    group = flush_prompt(Reason.THRESHOLD, now, is_direct=False)
    assert "not available in group chats" in group and 'file="MEMORY.md"' not in group


def test_flush_prompt_joins_a_trailing_user_message() -> None:
    user = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t"}]}
    merged = with_flush_prompt([user], "FLUSH")
    assert len(merged) == 1 and merged[0]["content"][-1] == {"type": "text", "text": "FLUSH"}
    after_reply = with_flush_prompt([user, {"role": "assistant", "content": []}], "FLUSH")
    assert after_reply[-1] == {"role": "user", "content": [{"type": "text", "text": "FLUSH"}]}
