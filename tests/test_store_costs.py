"""The cost ledger and the spending sums, on both stores: a call's cost reaches the ledger,
the sums and the session's counters together; totals by kind, person, chat, day and
session; holds that let turns run side by side far from a cap and one at a time near it,
that die with their turn's lease, and that two processes cannot both take near a cap."""

from __future__ import annotations

import asyncio

import pytest

from bot.store.base import Store
from bot.store.costs import CapUse, CostGroup, Hold, SpendKey
from bot.types import ChatType, CostKind, SessionOrigin, Usage
from tests import entries

ORIGIN = SessionOrigin("telegram", ChatType.DIRECT, "42", peer_id="42")
BOT_DAY = SpendKey("bot", "2026-05-04")
ALICE_DAY = SpendKey("person:alice", "2026-05-04")
NOW = 1_000.0
HOLDER = "host:1:aa"


async def leased(store: Store, key: str, holder: str = HOLDER) -> str:
    """Hold `key`'s session lease, as the lane running a turn there does."""
    assert await store.claim_lease(key, holder, NOW + 60, NOW)
    return key


def capped(limit: float, *keys: SpendKey) -> list[CapUse]:
    return [CapUse(key, limit) for key in keys]


async def test_a_calls_cost_reaches_the_ledger_the_sums_and_the_counters_together(
    any_store: Store,
) -> None:
    store = any_store
    session = await store.get_or_create_session("k", ORIGIN)
    sid = session.session_id
    sums = (BOT_DAY, ALICE_DAY, SpendKey("bot", "2026-05"))
    usage = Usage(input_tokens=10, output_tokens=5)
    reply = entries.reply(entries.text("hi"), session_id=sid, usage=usage)
    line = entries.cost(sid, 0.25, person="alice", chat="telegram:42", sums=sums)
    await store.record_model_call(reply, usage, context_tokens=15, cost=line, model="m")
    flush = entries.cost(sid, 0.125, kind=CostKind.FLUSH, person="alice", sums=sums)
    await store.add_usage(sid, usage, context_tokens=None, cost=flush, at=None)
    other_day = entries.cost(sid, 1.0, kind=CostKind.SUMMARY, day="2026-05-05")
    await store.add_usage(sid, usage, context_tokens=None, cost=other_day, at=None)

    row = await store.get_session(sid)
    assert row is not None and row.cost_usd == pytest.approx(1.375)
    by_kind = await store.cost_totals(CostGroup.KIND)
    assert {(t.key, t.calls, t.cost_usd) for t in by_kind} == {
        ("flush", 1, 0.125),
        ("summary", 1, 1.0),
        ("turn", 1, 0.25),
    }
    assert sum(t.cost_usd for t in by_kind) == pytest.approx(row.cost_usd)
    by_day = await store.cost_totals(CostGroup.DAY, since_day="2026-05-05")
    assert [(t.key, t.kind, t.cost_usd) for t in by_day] == [("2026-05-05", "summary", 1.0)]
    by_person = await store.cost_totals(CostGroup.PERSON)
    assert {(t.key, t.kind) for t in by_person} == {
        ("alice", "turn"),
        ("alice", "flush"),
        ("", "summary"),
    }
    assert [t.key for t in await store.cost_totals(CostGroup.CHAT, since_day="2026-05-06")] == []
    mine = await store.cost_totals(CostGroup.KIND, session_id=sid, since_day="2026-05-04")
    assert sum(t.cost_usd for t in mine) == pytest.approx(1.375)
    assert await store.cost_totals(CostGroup.KIND, session_id="other") == []
    found = await store.spend_of([BOT_DAY, ALICE_DAY, SpendKey("bot", "2026-05-05")], NOW)
    assert found[BOT_DAY].used_usd == pytest.approx(0.375)
    assert found[ALICE_DAY].used_usd == pytest.approx(0.375)
    assert found[SpendKey("bot", "2026-05-05")].used_usd == 0.0  # the summary added to no sum


async def test_far_from_a_cap_turns_run_side_by_side_and_near_it_one_at_a_time(
    any_store: Store,
) -> None:
    store = any_store
    cap = capped(1.0, BOT_DAY)
    a, b, c = [await leased(store, key) for key in ("ka", "kb", "kc")]
    # No turn has finished yet, so nothing says what one costs: one at a time.
    assert (await store.hold_spend("t1", a, HOLDER, cap, NOW))[0] == Hold.HELD
    held, uses = await store.hold_spend("t2", b, HOLDER, cap, NOW)
    assert held == Hold.WAIT and uses[0].running == 1
    # t1 cost 0.1: that is now the most one turn has cost against the sum.
    await store.add_usage(
        "s",
        Usage(),
        context_tokens=None,
        at=None,
        cost=entries.cost("s", 0.1, turn_id="t1", sums=(BOT_DAY,)),
    )
    await store.release_spend("t1")
    assert (await store.spend_of([BOT_DAY], NOW))[BOT_DAY].peak_usd == pytest.approx(0.1)
    # Far from the cap (0.1 used, room for many turns of 0.1): side by side.
    for n, key in enumerate((a, b, c)):
        assert (await store.hold_spend(f"u{n}", key, HOLDER, cap, NOW))[0] == Hold.HELD
    # 0.1 used, three running: one more could bring it to 0.5; under a 0.45 cap it waits.
    d = await leased(store, "kd")
    held, uses = await store.hold_spend("u3", d, HOLDER, capped(0.45, BOT_DAY), NOW)
    assert held == Hold.WAIT and uses[0].running == 3
    for n in range(3):
        await store.release_spend(f"u{n}")
    assert (await store.hold_spend("u3", d, HOLDER, capped(0.45, BOT_DAY), NOW))[0] == Hold.HELD


async def test_a_sum_at_its_cap_refuses_every_turn(any_store: Store) -> None:
    store = any_store
    await store.add_usage(
        "s",
        Usage(),
        context_tokens=None,
        at=None,
        cost=entries.cost("s", 2.0, sums=(BOT_DAY, ALICE_DAY)),
    )
    key = await leased(store, "k")
    held, uses = await store.hold_spend(
        "t", key, HOLDER, capped(5, BOT_DAY) + capped(2, ALICE_DAY), NOW
    )
    assert held == Hold.OVER
    assert [(u.key, u.over) for u in uses] == [(BOT_DAY, False), (ALICE_DAY, True)]
    # Refused turns hold nothing.
    assert (await store.spend_of([BOT_DAY], NOW))[BOT_DAY].running == 0


async def test_a_hold_lives_only_as_long_as_its_turns_lease(any_store: Store) -> None:
    store = any_store
    cap = capped(1.0, BOT_DAY)
    dead = await leased(store, "k-dead", "host:99:dead")
    assert (await store.hold_spend("t1", dead, "host:99:dead", cap, NOW))[0] == Hold.HELD
    alive = await leased(store, "k-live")
    assert (await store.hold_spend("t2", alive, HOLDER, cap, NOW))[0] == Hold.WAIT
    # The first holder's process is gone: its lease goes, and its hold with it.
    await store.release_leases_of("host:99:dead")
    assert (await store.hold_spend("t2", alive, HOLDER, cap, NOW))[0] == Hold.HELD
    # A lease that expires lets go of its holds too.
    await store.release_spend("t2")
    assert (await store.hold_spend("t3", alive, HOLDER, cap, NOW))[0] == Hold.HELD
    assert (await store.spend_of([BOT_DAY], NOW + 61))[BOT_DAY].running == 0


async def test_two_processes_near_a_cap_never_both_take_a_hold(
    any_store: Store, twin: Store
) -> None:
    cap = capped(1.0, BOT_DAY, ALICE_DAY)
    keys = [await leased(any_store, f"k{n}") for n in range(10)]
    results = await asyncio.gather(
        *(
            store.hold_spend(f"t{n}", key, HOLDER, cap, NOW)
            for n, (store, key) in enumerate(zip([any_store, twin] * 5, keys, strict=True))
        )
    )
    assert [held for held, _ in results].count(Hold.HELD) == 1
    assert (await twin.spend_of([ALICE_DAY], NOW))[ALICE_DAY].running == 1
