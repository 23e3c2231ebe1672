"""The cost ledger's totals as people read them, for `krill costs` and the console's costs
page: one row per group (a person, a chat, a day, a kind of work) split by kind, and each
kind's cost per day for a chart."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from bot.store.costs import CostGroup, CostTotal
from bot.types import CostKind

NOBODY = "(no one)"  # a call no one person asked for (a group's flush or summary)


@dataclass(slots=True)
class CostRow:
    """One group's calls and cost, split by kind of work."""

    key: str
    calls: int = 0
    cost_usd: float = 0.0
    by_kind: dict[str, float] = field(default_factory=dict)


def cost_rows(totals: list[CostTotal], by: CostGroup) -> list[CostRow]:
    """The ledger's totals per group and kind folded into one row per group: days in
    order, anything else dearest first."""
    rows: dict[str, CostRow] = {}
    for total in totals:
        row = rows.setdefault(total.key or NOBODY, CostRow(total.key or NOBODY))
        row.calls += total.calls
        row.cost_usd += total.cost_usd
        row.by_kind[total.kind] = row.by_kind.get(total.kind, 0.0) + total.cost_usd
    if by == CostGroup.DAY:
        return sorted(rows.values(), key=lambda r: r.key)
    return sorted(rows.values(), key=lambda r: (-r.cost_usd, r.key))


def day_series(
    totals: list[CostTotal],
    days: list[str],
    value: Callable[[CostTotal], float] = lambda total: total.cost_usd,
) -> dict[str, list[float]]:
    """From totals by day, each kind of work's cost (or other `value`) on each of `days`
    (kinds in `CostKind` order, those with nothing on any of them left out)."""
    at = {day: i for i, day in enumerate(days)}
    series: dict[str, list[float]] = {}
    for kind in CostKind:
        values = [0.0] * len(days)
        for total in totals:
            if total.kind == kind and total.key in at:
                values[at[total.key]] += value(total)
        if any(values):
            series[kind.value] = values
    return series
