"""Chunk planning for the summarizer."""

from __future__ import annotations

from bot.config import ContextConfig
from bot.context.compaction.chunks import chunk_share, plan_chunks
from bot.context.compaction.render import Item

CFG = ContextConfig()


def test_chunks_shrink_for_large_messages_and_oversized_ones_are_omitted() -> None:
    small = [Item("user", "x" * 400) for _ in range(10)]
    assert chunk_share(small, 10_000, CFG) == CFG.chunk_max_share
    large = [Item("tool", "x" * 6_000) for _ in range(4)]  # ~1.8k tokens: 18% of 10k
    assert CFG.chunk_min_share <= chunk_share(large, 10_000, CFG) < CFG.chunk_max_share
    huge = [Item("tool", "x" * 40_000) for _ in range(2)]
    assert chunk_share(huge, 10_000, CFG) == CFG.chunk_min_share

    items = [Item("user", "a" * 4_000), Item("tool", "b" * 20_000), Item("user", "c" * 4_000)]
    plan = plan_chunks(items, 10_000, CFG)
    assert plan.omitted == 1
    flat = [i for chunk in plan.chunks for i in chunk]
    assert flat[1].omitted and flat[1].text == "[Large tool result (~6K tokens) omitted]"
    budget = 10_000 * chunk_share(items, 10_000, CFG)
    assert all(sum(i.tokens for i in chunk) <= budget for chunk in plan.chunks)


def test_a_message_bigger_than_a_chunk_but_under_half_the_window_is_summarized_alone() -> None:
    big = Item("tool", "b" * 12_000)  # ~3.6k tokens: over an 8k window's chunk, under half
    items = [Item("user", "a" * 400), Item("user", "a2" * 200), big, Item("user", "c" * 400)]
    plan = plan_chunks(items, 8_000, CFG)
    assert plan.omitted == 0
    assert plan.chunks == [items[:2], [big], items[3:]]
