"""The ledger's totals as `krill costs` and the console show them: one row per group split by
kind (days in order, the rest dearest first, calls no one person asked for named so), each
kind's cost per day for the chart, and a `--since` that is not a day refused."""

from __future__ import annotations

import argparse

import pytest

from bot.cli.costs import since_day
from bot.spending.report import NOBODY, cost_rows, day_series
from bot.store.costs import CostGroup, CostTotal


def test_rows_fold_the_kinds_of_each_group_dearest_first() -> None:
    totals = [
        CostTotal("", "flush", 2, 0.02),
        CostTotal("alice", "turn", 3, 0.30),
        CostTotal("alice", "tool_followup", 1, 0.05),
        CostTotal("bob", "turn", 1, 0.50),
    ]
    rows = cost_rows(totals, CostGroup.PERSON)
    assert [(r.key, r.calls) for r in rows] == [("bob", 1), ("alice", 4), (NOBODY, 2)]
    assert rows[1].by_kind == {"turn": 0.30, "tool_followup": 0.05}
    assert rows[1].cost_usd == pytest.approx(0.35)
    days = cost_rows(
        [CostTotal("2026-05-05", "turn", 1, 9), CostTotal("2026-05-04", "turn", 1, 1)],
        CostGroup.DAY,
    )
    assert [r.key for r in days] == ["2026-05-04", "2026-05-05"]


def test_the_chart_has_one_series_per_kind_that_cost_something() -> None:
    totals = [
        CostTotal("2026-05-04", "summary", 1, 0.1),
        CostTotal("2026-05-05", "turn", 2, 0.4),
        CostTotal("2026-04-01", "flush", 1, 7.0),  # before the days shown
    ]
    series = day_series(totals, ["2026-05-04", "2026-05-05", "2026-05-06"])
    assert series == {"turn": [0.0, 0.4, 0.0], "summary": [0.1, 0.0, 0.0]}


def test_since_must_be_a_day() -> None:
    assert since_day("2026-05-04") == "2026-05-04"
    with pytest.raises(argparse.ArgumentTypeError, match="not a day like"):
        since_day("04/05/2026")
