"""The price of a warm compaction against re-writing the history on the next burst."""

from __future__ import annotations

from bot.agent.pricing import estimate_cost
from bot.context.cache_cost import WarmCompaction
from bot.types import Usage


def priced(context: int, kept: int, *, summary: int = 1_000, calls: int = 2) -> WarmCompaction:
    return WarmCompaction(
        context_tokens=context,
        kept_tokens=kept,
        summary_tokens=summary,
        prompt_tokens=700,
        calls=calls,
    )


def test_a_long_history_with_a_short_kept_part_is_cheaper_compacted() -> None:
    assert priced(20_000, 5_000).pays("5m")
    assert priced(25_000, 5_000).saving("5m") > 10_000  # input-token equivalents


def test_a_history_mostly_kept_is_cheaper_left_alone() -> None:
    assert not priced(15_000, 14_000).pays("5m")
    assert not priced(7_000, 3_500).pays("5m")


def test_every_retry_and_a_longer_summary_count_against_it() -> None:
    close = priced(14_000, 4_000, calls=1)
    assert close.pays("5m")
    assert not priced(14_000, 4_000, calls=3).pays("5m")
    assert not priced(14_000, 4_000, summary=2_500, calls=1).pays("5m")


def test_the_dearer_one_hour_cache_write_makes_compaction_pay_sooner() -> None:
    edge = priced(12_500, 4_000)
    assert not edge.pays("5m") and edge.pays("1h")
    assert edge.saving("1h") > edge.saving("5m")


def test_pricing_charges_the_same_cache_multipliers() -> None:
    million = 1_000_000
    write = estimate_cost("claude-sonnet-4-6", Usage(cache_write_tokens=million))
    read = estimate_cost("claude-sonnet-4-6", Usage(cache_read_tokens=million))
    assert (round(write, 2), round(read, 2)) == (3.75, 0.30)
    hour = estimate_cost("claude-sonnet-4-6", Usage(cache_write_tokens=million), "1h")
    assert round(hour, 2) == 6.0
