"""Compaction service decisions: when the context needs compacting."""

from __future__ import annotations

from bot.context.compaction.service import needs_compaction


def test_threshold_is_window_minus_reserve() -> None:
    assert not needs_compaction(180_000, 200_000, 20_000)
    assert needs_compaction(180_001, 200_000, 20_000)
