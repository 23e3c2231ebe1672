"""`krill costs`: what the model calls cost, from the store's ledger, grouped by kind of work,
person, chat or day, as a table, JSON or CSV. The figures are the estimates the caps count
(list prices; the provider's invoice is the truth)."""

from __future__ import annotations

import argparse
import asyncio
import csv
import datetime as dt
import json
import sys

from bot.cli.store_access import with_store
from bot.config import Config
from bot.spending.caps import usd
from bot.spending.report import CostRow, cost_rows
from bot.store.base import Store
from bot.store.costs import CostGroup

BY_CHOICES = [CostGroup.KIND, CostGroup.PERSON, CostGroup.CHAT, CostGroup.DAY]


def since_day(text: str) -> str:
    """`--since`: a day as YYYY-MM-DD, checked, so a typo is an error rather than no rows."""
    try:
        return dt.date.fromisoformat(text).isoformat()
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a day like 2026-05-04") from None


def _text(rows: list[CostRow], by: CostGroup, since: str) -> str:
    period = f" since {since}" if since else ""
    if not rows:
        return f"No model calls recorded{period}."
    width = max(len(by.capitalize()), *(len(r.key) for r in rows))
    lines = [f"{by.capitalize():<{width}}  {'Calls':>7}  {'Cost':>10}  Split"]
    for r in rows:
        split = (
            ", ".join(f"{kind} {usd(cost)}" for kind, cost in sorted(r.by_kind.items()))
            if by != CostGroup.KIND
            else ""
        )
        lines.append(f"{r.key:<{width}}  {r.calls:>7}  {usd(r.cost_usd):>10}  {split}".rstrip())
    total = sum(r.cost_usd for r in rows)
    calls = sum(r.calls for r in rows)
    lines.append(f"{'Total':<{width}}  {calls:>7}  {usd(total):>10}")
    lines.append(f"Estimated from list prices{period}; the provider's invoice is the truth.")
    return "\n".join(lines)


def costs_command(config: Config, args: argparse.Namespace) -> int:
    by = CostGroup(args.by)
    since = args.since or ""

    async def run(store: Store) -> int:
        totals = await store.cost_totals(by, since_day=since)
        if args.json:
            print(
                json.dumps(
                    [
                        {"key": t.key, "kind": t.kind, "calls": t.calls, "cost_usd": t.cost_usd}
                        for t in totals
                    ],
                    ensure_ascii=False,
                )
            )
        elif args.csv:
            out = csv.writer(sys.stdout, lineterminator="\n")
            out.writerow([by.value, "kind", "calls", "cost_usd"])
            out.writerows([t.key, t.kind, t.calls, f"{t.cost_usd:.6f}"] for t in totals)
        else:
            print(_text(cost_rows(totals, by), by, since))
        return 0

    return asyncio.run(with_store(config, run))
