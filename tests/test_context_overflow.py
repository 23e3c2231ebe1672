"""Overflow recovery's pure part: how far to cut tool results, and the new branch."""

from __future__ import annotations

from bot.context.overflow import (
    BRANCH_NOTE,
    BRANCH_REASON,
    MIN_TRUNCATED_RESULT_CHARS,
    truncation_branch,
    water_level,
)
from bot.transcript import Compaction, Entry, EntryKind, ToolResults
from tests import entries as build


def test_water_level_cuts_the_largest_results_first() -> None:
    # Removing 30k from [50k, 20k, 5k] means capping at 20k: only the 50k result is cut.
    assert water_level([50_000, 20_000, 5_000], 30_000, 2_000) == 20_000
    assert water_level([50_000, 20_000, 5_000], 60_000, 2_000) == 5_000
    # Never below the floor, even when that cannot free enough.
    assert water_level([10_000, 10_000], 10**6, 2_000) == 2_000
    assert water_level([1_000, 2_000], 500, 2_000) is None
    assert water_level([], 500, 2_000) is None


def history() -> list[Entry]:
    calls = [{"type": "tool_use", "id": c, "name": "read", "input": {}} for c in ("a", "b")]
    results = [
        {"type": "tool_result", "tool_use_id": "a", "content": "A" * 50_000},
        {"type": "tool_result", "tool_use_id": "b", "content": "B" * 1_000},
    ]
    return [
        build.person("read both", turn_id="t", parent_id="root"),
        build.reply(*calls, turn_id="t"),
        build.results(*results, turn_id="t"),
    ]


def test_branch_repeats_history_with_results_cut_and_points_at_it() -> None:
    original = history()
    branch = truncation_branch(original, excess_chars=30_000, tokens_before=123, result_limit=10**6)
    assert branch is not None
    *copies, marker = branch
    assert [c.kind for c in copies] == [
        EntryKind.PERSON_TURN,
        EntryKind.ASSISTANT_REPLY,
        EntryKind.TOOL_RESULTS,
    ]
    assert all(c.id != o.id and c.turn_id == "t" for c, o in zip(copies, original, strict=True))
    # A sibling of the original branch, chained entry by entry.
    assert copies[0].parent_id == "root"
    assert [c.parent_id for c in copies[1:]] == [c.id for c in copies[:-1]]
    assert isinstance(copies[2].payload, ToolResults)
    cut, kept = copies[2].payload.results
    assert cut["content"].startswith("A" * 10_000) and "truncated" in cut["content"]
    assert cut["content"].endswith("A" * 5_000) and len(cut["content"]) <= 20_000
    assert kept["content"] == "B" * 1_000
    assert isinstance(marker.payload, Compaction) and marker.parent_id == copies[-1].id
    assert marker.payload.first_kept_entry_id == copies[0].id
    assert marker.payload.summary == BRANCH_NOTE
    assert marker.payload.reason == BRANCH_REASON
    # The originals are untouched.
    assert isinstance(original[2].payload, ToolResults)
    assert original[2].payload.results[0]["content"] == "A" * 50_000


def test_branch_keeps_an_earlier_summary_and_refuses_when_nothing_is_big() -> None:
    previous = build.summary("## Decisions\n- x")
    branch = truncation_branch(
        [previous, *history()], excess_chars=1, tokens_before=1, result_limit=10**6
    )
    assert branch is not None and isinstance(branch[-1].payload, Compaction)
    assert branch[-1].payload.summary == "## Decisions\n- x"
    small = history()[:2]
    assert truncation_branch(small, excess_chars=1, tokens_before=1, result_limit=10**6) is None
    assert MIN_TRUNCATED_RESULT_CHARS > 1_000


def test_branch_sizes_count_only_what_the_cap_let_through() -> None:
    # Sent capped to 30k, the 50k result needs cutting to 20k to free 10k characters.
    branch = truncation_branch(history(), excess_chars=10_000, tokens_before=1, result_limit=30_000)
    assert branch is not None
    assert isinstance(branch[2].payload, ToolResults)
    cut = str(branch[2].payload.results[0]["content"])
    assert 19_000 < len(cut) <= 20_000 and "truncated" in cut
