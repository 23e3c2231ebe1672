"""The cost ledger and the spending sums the caps are checked against.

The ledger has one row per model call: when, the day it fell on (in `agent.timezone`), what
it was for, its channel, chat, person and session, the model and its estimated cost. Each
call also adds its cost to the sums it counts in (`spend`: per scope — the bot, a person, a
group chat — and period — a day or a month), in the same transaction as the session's
counters, so the ledger, the sums and the counters never disagree, across restarts and
replicas alike.

A turn that counts against a cap first takes a hold on the cap's sum (`hold_spend`): one
transaction that takes turns per scope across replicas, finds the sum over the cap (the turn
is refused), near it (it waits), or takes the hold. Near means another turn holds the sum
and the sum plus one more turn than are running, at the most one turn has cost there this
period, would reach the cap: far from a cap turns run side by side, close to it one at a
time, so all replicas together cross a cap by at most the last turn's cost. A hold lives as
long as the session lease of the turn that took it (a replica that dies lets go of both);
`release_spend` drops it and records the turn's cost as the sum's peak when it is larger.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from bot.store.db import SPEND_LOCK, Db, Row
from bot.types import Payer


@dataclass(frozen=True, slots=True)
class SpendKey:
    """One sum: a scope ("bot", "person:<person>", "chat:<channel>:<chat_id>") in a period
    ("2026-05-04", "2026-05")."""

    scope: str
    period: str


@dataclass(frozen=True, slots=True)
class CostLine:
    """One model call as the ledger keeps it, and the sums it adds to."""

    at: float
    day: str
    kind: str
    payer: Payer
    model: str
    cost_usd: float
    sums: tuple[SpendKey, ...]


@dataclass(frozen=True, slots=True)
class CapUse:
    """Where one sum stands against a cap on it."""

    key: SpendKey
    limit_usd: float
    used_usd: float = 0.0
    peak_usd: float = 0.0  # the most one turn has cost against it this period
    running: int = 0  # turns holding it now

    @property
    def over(self) -> bool:
        return self.used_usd >= self.limit_usd

    @property
    def near(self) -> bool:
        """Another turn may not start beside the running ones: with one more, the sum could
        reach the cap (or no turn has finished yet to say what one costs)."""
        if not self.running:
            return False
        return not self.peak_usd or (
            self.used_usd + (self.running + 1) * self.peak_usd >= self.limit_usd
        )


class Hold(StrEnum):
    HELD = "held"  # the turn may run; its hold counts until release_spend
    OVER = "over"  # a sum has reached its cap
    WAIT = "wait"  # near a cap with other turns running: try again when one has finished


class CostGroup(StrEnum):
    """What the costs table is totalled by."""

    KIND = "kind"
    PERSON = "person"
    CHAT = "chat"
    DAY = "day"
    SESSION = "session_id"


@dataclass(frozen=True, slots=True)
class CostTotal:
    """Calls and cost of one group (a person, a day, …) and one kind of work."""

    key: str
    kind: str
    calls: int
    cost_usd: float


class CostStore(Protocol):
    """The ledger's totals, the sums and the holds turns take on them."""

    async def spend_of(self, keys: list[SpendKey], now: float) -> dict[SpendKey, CapUse]:
        """The sums at `keys` (0 where nothing was spent), with the turns holding each;
        `limit_usd` is left 0 for the caller to fill in."""
        ...

    async def hold_spend(
        self, turn_id: str, session_key: str, holder: str, caps: list[CapUse], now: float
    ) -> tuple[Hold, list[CapUse]]:
        """Take `turn_id`'s holds on the sums `caps` name (their limits set), unless one is
        over or near its cap; returns the outcome and where each sum stood."""
        ...

    async def release_spend(self, turn_id: str) -> None:
        """Drop `turn_id`'s holds, recording its cost as their sums' peak when larger."""
        ...

    async def cost_totals(
        self, by: CostGroup, *, since_day: str = "", session_id: str = ""
    ) -> list[CostTotal]:
        """Calls and cost per group and kind since `since_day` (YYYY-MM-DD, inclusive;
        "" for all), of one session or all."""
        ...


_INSERT_LINE = (
    "INSERT INTO costs(at, day, kind, channel, chat, person, session_id, turn_id, model,"
    " cost_usd) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
# One statement for all of a line's sums (one round trip, not one per sum); `{values}` is
# one "(?, ?, ?, 0)" per sum.
_ADD_SPEND = (
    "INSERT INTO spend(scope, period, used_usd, peak_usd) VALUES {values}"
    " ON CONFLICT(scope, period) DO UPDATE SET used_usd = spend.used_usd + excluded.used_usd"
)
# Holds whose turn's session lease is still held by the process that took them.
_LIVE = (
    "EXISTS (SELECT 1 FROM session_leases l WHERE l.session_key = spend_holds.session_key"
    " AND l.holder = spend_holds.holder AND l.expires_at > ?)"
)


async def write_cost(tx: Db, line: CostLine) -> None:
    """Add `line` to the ledger and its sums (inside the caller's transaction). The sums
    are written in one order everywhere, so concurrent writers never deadlock."""
    payer = line.payer
    await tx.execute(
        _INSERT_LINE,
        line.at,
        line.day,
        line.kind,
        payer.channel,
        payer.chat,
        payer.person,
        payer.session_id,
        payer.turn_id,
        line.model,
        line.cost_usd,
    )
    keys = sorted(set(line.sums), key=lambda k: (k.scope, k.period))
    if keys:
        values = ", ".join(["(?, ?, ?, 0)"] * len(keys))
        args = [v for key in keys for v in (key.scope, key.period, line.cost_usd)]
        await tx.execute(_ADD_SPEND.format(values=values), *args)


async def _uses(db: Db, keys: list[SpendKey], now: float) -> dict[SpendKey, CapUse]:
    scopes = sorted({key.scope for key in keys})
    if not scopes:
        return {}
    where, args = db.dialect.one_of("scope", scopes)
    sums = {
        SpendKey(str(row[0]), str(row[1])): (float(row[2]), float(row[3]))
        for row in await db.fetch(
            f"SELECT scope, period, used_usd, peak_usd FROM spend WHERE {where}", *args
        )
    }
    running: dict[SpendKey, int] = {}
    for row in await db.fetch(
        f"SELECT scope, period, COUNT(*) FROM spend_holds WHERE {where} AND {_LIVE}"
        " GROUP BY scope, period",
        *args,
        now,
    ):
        running[SpendKey(str(row[0]), str(row[1]))] = int(row[2])
    return {key: CapUse(key, 0.0, *sums.get(key, (0.0, 0.0)), running.get(key, 0)) for key in keys}


def _total(row: Row) -> CostTotal:
    return CostTotal(str(row[0]), str(row[1]), int(row[2]), float(row[3]))


class CostTables:
    db: Db

    async def spend_of(self, keys: list[SpendKey], now: float) -> dict[SpendKey, CapUse]:
        return await _uses(self.db, keys, now)

    async def hold_spend(
        self, turn_id: str, session_key: str, holder: str, caps: list[CapUse], now: float
    ) -> tuple[Hold, list[CapUse]]:
        async with self.db.transaction() as tx:
            scopes = sorted({cap.key.scope for cap in caps})
            for scope in scopes:
                await tx.dialect.lock_key(tx, SPEND_LOCK, scope)
            # Holds of turns whose lease is gone (their process died) hold nothing.
            where, args = tx.dialect.one_of("scope", scopes)
            await tx.execute(f"DELETE FROM spend_holds WHERE {where} AND NOT {_LIVE}", *args, now)
            found = await _uses(tx, [cap.key for cap in caps], now)
            uses = [
                CapUse(cap.key, cap.limit_usd, u.used_usd, u.peak_usd, u.running)
                for cap in caps
                for u in [found[cap.key]]
            ]
            if any(use.over for use in uses):
                return Hold.OVER, uses
            if any(use.near for use in uses):
                return Hold.WAIT, uses
            await tx.executemany(
                "INSERT INTO spend_holds(turn_id, scope, period, session_key, holder)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                [(turn_id, u.key.scope, u.key.period, session_key, holder) for u in uses],
            )
            return Hold.HELD, uses

    async def release_spend(self, turn_id: str) -> None:
        async with self.db.transaction() as tx:
            cost = float(
                await tx.fetchval(
                    "SELECT COALESCE(SUM(cost_usd), 0) FROM costs WHERE turn_id = ?", turn_id
                )
                or 0.0
            )
            await tx.execute(
                "UPDATE spend SET peak_usd = ? WHERE peak_usd < ? AND (scope, period) IN"
                " (SELECT scope, period FROM spend_holds WHERE turn_id = ?)",
                cost,
                cost,
                turn_id,
            )
            await tx.execute("DELETE FROM spend_holds WHERE turn_id = ?", turn_id)

    async def cost_totals(
        self, by: CostGroup, *, since_day: str = "", session_id: str = ""
    ) -> list[CostTotal]:
        rows = await self.db.fetch(
            f"SELECT {by}, kind, COUNT(*), SUM(cost_usd) FROM costs"
            " WHERE day >= ? AND (? = '' OR session_id = ?)"
            f" GROUP BY {by}, kind ORDER BY {by}, kind",
            since_day,
            session_id,
            session_id,
        )
        return [_total(row) for row in rows]
