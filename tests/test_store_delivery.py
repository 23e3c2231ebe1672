"""The delivery contract every store keeps, SQLite and PostgreSQL alike: inbound dedupe and
the group buffer handed over once (also when two replicas race), outbox claims (two
senders never get one row, a chat's next row waits behind a head being sent, a dead
sender's claim can be taken over once it expired) and session leases."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from bot.store.base import BufferedLine, InboundStatus, Store
from bot.store.outbox import SET_ASIDE, UNFINISHED, _heads
from bot.store.outbox_rows import OutboxChunk, OutboxStatus
from bot.store.sqlite import SQLiteStore
from bot.types import Address

LOCAL = ["local"]


def chunks(chat: str, turn: str, count: int) -> list[OutboxChunk]:
    address = Address("local", chat)
    return [OutboxChunk(turn, i, count, address, f"{chat} {turn} {i}") for i in range(count)]


async def test_an_update_delivered_twice_at_once_is_accepted_once(any_store: Store) -> None:
    results = await asyncio.gather(
        *(any_store.accept_inbound("telegram", "7:1", "k", "{}") for _ in range(6))
    )
    accepted = [inbound_id for inbound_id, _ in results if inbound_id is not None]
    assert len(accepted) == 1
    assert not await any_store.mark_seen("telegram", "7:1", "k", InboundStatus.COMMAND)
    assert await any_store.mark_seen("slack", "7:1", "k", InboundStatus.COMMAND)
    assert await any_store.seen_inbound("slack", "7:1")
    assert await any_store.count_inbound(InboundStatus.PENDING) == 1
    (row,) = await any_store.unfinished_inbound()
    assert (row.id, row.channel, row.external_id, row.status) == (
        accepted[0],
        "telegram",
        "7:1",
        InboundStatus.PENDING,
    )


async def test_the_group_buffer_is_handed_over_once_when_two_mentions_race(
    any_store: Store,
) -> None:
    for i in range(4):
        line = BufferedLine(f"user{i}", f"msg {i}", time.time())
        assert await any_store.buffer_message("slack", f"b{i}", "g", line, limit=3)
    assert not await any_store.buffer_message("slack", "b0", "g", None, limit=3)
    assert await any_store.buffer_count("g") == 3

    def merge(payload: str, lines: list[BufferedLine]) -> str:
        return "|".join(line.text for line in lines)

    results = await asyncio.gather(
        *(
            any_store.accept_inbound("slack", f"m{i}", "g", "{}", take_buffer=True, merge=merge)
            for i in range(2)
        )
    )
    handed = [[line.text for line in lines] for _, lines in results]
    assert sorted(handed) == [[], ["msg 1", "msg 2", "msg 3"]]
    assert await any_store.buffer_count("g") == 0
    payloads = sorted(row.payload for row in await any_store.unfinished_inbound())
    assert payloads == ["msg 1|msg 2|msg 3", "{}"]


async def test_two_senders_claiming_at_once_never_get_the_same_row(any_store: Store) -> None:
    for chat in range(20):
        await any_store.outbox_add(chunks(f"c{chat}", f"t{chat}", 3), 1.0)
    sent: list[tuple[str, str]] = []
    # Neither sends before both have claimed once, so the second claims while the first
    # holds its rows, however slowly its connection opens.
    claimed = {"replica-a": asyncio.Event(), "replica-b": asyncio.Event()}

    async def sender(holder: str, other: str) -> None:
        while True:
            rows = await any_store.outbox_claim(LOCAL, holder, 2.0, 60.0, 4)
            claimed[holder].set()
            await claimed[other].wait()
            if not rows and not await any_store.outbox_heads(LOCAL):
                return
            for row in rows:
                assert await any_store.outbox_mark_sending(row.id, holder, 2.0)
                sent.append((holder, row.text))
                await any_store.outbox_mark_sent(row.id, f"m{row.id}", 2.0)
            await asyncio.sleep(0)

    async with asyncio.timeout(60):
        await asyncio.gather(sender("replica-a", "replica-b"), sender("replica-b", "replica-a"))
    texts = [text for _, text in sent]
    assert sorted(texts) == sorted(f"c{c} t{c} {i}" for c in range(20) for i in range(3))
    for chat in range(20):  # in order per chat
        assert [t for t in texts if t.startswith(f"c{chat} ")] == [
            f"c{chat} t{chat} {i}" for i in range(3)
        ]
    assert {holder for holder, _ in sent} == {"replica-a", "replica-b"}


async def test_a_chats_next_row_waits_while_its_head_is_being_sent(any_store: Store) -> None:
    await any_store.outbox_add(chunks("a", "t1", 2) + chunks("b", "t2", 1), 1.0)
    first = await any_store.outbox_claim(LOCAL, "replica-a", 2.0, 30.0, 1)
    assert [row.text for row in first] == ["a t1 0"]  # the limit: one
    second = await any_store.outbox_claim(LOCAL, "replica-b", 2.0, 30.0, 10)
    assert [row.text for row in second] == ["b t2 0"]  # not "a t1 1"
    assert await any_store.outbox_claim(LOCAL, "replica-b", 3.0, 30.0, 10) == []
    assert await any_store.outbox_mark_sending(first[0].id, "replica-a", 3.0)
    assert not await any_store.outbox_mark_sending(first[0].id, "replica-b", 3.0)
    await any_store.outbox_mark_sent(first[0].id, "m1", 4.0)
    (after,) = await any_store.outbox_claim(LOCAL, "replica-b", 4.0, 30.0, 10)
    assert after.text == "a t1 1"


async def test_a_dead_row_put_back_waits_while_a_later_row_of_its_chat_is_sent(
    any_store: Store,
) -> None:
    await any_store.outbox_add(chunks("a", "t1", 1) + chunks("a", "t2", 1), 1.0)
    (dead,) = await any_store.outbox_claim(LOCAL, "replica-a", 1.0, 30.0, 10)
    await any_store.outbox_mark_dead(dead.id, "blocked", "", 1.0)
    (later,) = await any_store.outbox_claim(LOCAL, "replica-a", 2.0, 30.0, 10)
    assert later.text == "a t2 0"
    assert await any_store.outbox_retry_dead(dead.id, 3.0)  # the operator's retry
    assert await any_store.outbox_claim(LOCAL, "replica-b", 3.0, 30.0, 10) == []
    await any_store.outbox_mark_sent(later.id, "m2", 4.0)
    (again,) = await any_store.outbox_claim(LOCAL, "replica-b", 4.0, 30.0, 10)
    assert (again.id, again.status) == (dead.id, OutboxStatus.PENDING)


async def test_an_expired_claim_is_taken_over_and_its_send_counts_as_unknown(
    any_store: Store,
) -> None:
    await any_store.outbox_add(chunks("a", "t1", 1), 1.0)
    (row,) = await any_store.outbox_claim(LOCAL, "dies", 1.0, 10.0, 10)
    assert await any_store.outbox_mark_sending(row.id, "dies", 1.0)
    assert await any_store.outbox_claimants() == ["dies"]
    await any_store.outbox_extend_claims("dies", [row.id], 20.0)
    assert await any_store.outbox_claim(LOCAL, "survivor", 15.0, 45.0, 10) == []
    (taken,) = await any_store.outbox_claim(LOCAL, "survivor", 20.0, 50.0, 10)
    # In flight when its sender died: the new sender checks before sending again.
    assert (taken.id, taken.status, taken.attempts) == (row.id, OutboxStatus.SENDING, 1)
    assert not await any_store.outbox_mark_sending(row.id, "dies", 21.0)  # too late
    await any_store.outbox_extend_claims("dies", [row.id], 99.0)  # changes nothing
    assert await any_store.outbox_claimants() == ["survivor"]
    await any_store.outbox_release_claims("survivor")
    assert await any_store.outbox_claimants() == []
    (free,) = await any_store.outbox_claim(LOCAL, "next", 21.0, 51.0, 10)
    assert free.id == row.id


async def test_claims_honour_due_times_and_say_when_the_next_row_is_due(
    any_store: Store,
) -> None:
    await any_store.outbox_add(chunks("a", "t1", 1) + chunks("b", "t2", 1), 1.0)
    (a, b) = await any_store.outbox_claim(LOCAL, "me", 1.0, 30.0, 10)
    await any_store.outbox_retry_at(a.id, 50.0, "flood control", 1.0)
    await any_store.outbox_retry_at(b.id, 40.0, "502", 1.0, unknown=True)
    assert await any_store.outbox_next_due(LOCAL, 2.0) == 40.0
    assert await any_store.outbox_claim(LOCAL, "me", 39.0, 69.0, 10) == []
    (due,) = await any_store.outbox_claim(LOCAL, "other", 40.0, 70.0, 10)
    assert (due.id, due.status) == (b.id, OutboxStatus.UNCONFIRMED)
    assert await any_store.outbox_next_due(LOCAL, 40.0) == 50.0
    assert await any_store.outbox_next_due(["telegram"], 40.0) is None
    assert await any_store.outbox_claim(["telegram"], "me", 60.0, 90.0, 10) == []


async def test_a_split_row_and_its_overflow_keep_their_place(any_store: Store) -> None:
    await any_store.outbox_add(chunks("a", "t1", 2), 1.0)
    (head,) = await any_store.outbox_claim(LOCAL, "me", 1.0, 30.0, 10)
    await any_store.outbox_split(head.id, "first half", "second half", 1.0)
    (half,) = await any_store.outbox_claim(LOCAL, "me", 1.0, 30.0, 10)
    assert (half.id, half.text) == (head.id, "first half")
    await any_store.outbox_mark_sent(half.id, "m1", 2.0)
    (rest,) = await any_store.outbox_claim(LOCAL, "me", 2.0, 30.0, 10)
    assert (rest.id, rest.text, rest.edit_of) == (head.id, "second half", None)
    await any_store.outbox_put_preview("t9", Address("local", "a"), "p1", 3.0)
    assert await any_store.outbox_preview("t9") == "p1"
    await any_store.outbox_put_preview("t9", Address("local", "a"), "p2", 3.0)
    assert await any_store.outbox_preview("t9") == "p2"


async def test_one_lease_holder_at_a_time_and_an_expired_one_is_taken_over(
    any_store: Store,
) -> None:
    results = await asyncio.gather(
        *(any_store.claim_lease("s", f"replica-{i}", 10.0, 1.0) for i in range(4))
    )
    assert results.count(True) == 1
    winner = f"replica-{results.index(True)}"
    loser = next(f"replica-{i}" for i in range(4) if not results[i])
    assert await any_store.lease_holder("s", 5.0) == winner
    assert await any_store.claim_lease("s", winner, 20.0, 5.0)  # a renewal
    assert not await any_store.claim_lease("s", loser, 25.0, 15.0)
    assert await any_store.claim_lease("s", loser, 30.0, 20.0)  # expired at 20
    assert await any_store.lease_holder("s", 25.0) == loser
    await any_store.release_lease("s", winner)  # no longer the holder: nothing happens
    assert await any_store.lease_holder("s", 25.0) == loser
    assert await any_store.claim_lease("t", winner, 30.0, 20.0)
    assert sorted(await any_store.lease_holders()) == sorted([winner, loser])
    await any_store.release_leases_of(loser)
    assert await any_store.lease_holder("s", 25.0) is None
    await any_store.release_lease("t", winner)
    assert await any_store.lease_holders() == []


async def test_the_senders_reads_skip_the_rows_already_sent(tmp_path: Path) -> None:
    # With retention off the outbox keeps every reply ever sent; the reads the sender makes
    # at every step (heads to claim, when the next is due, the /status counts) must go
    # through the indexes over rows still in play, not read the whole table each time.
    store = SQLiteStore(tmp_path / "krill.db")
    await store.open()
    try:
        heads, args = _heads(store.db, ["telegram", "slack"])
        reads = [
            (f"SELECT MIN(next_attempt_at) FROM outbox WHERE id IN ({heads})", args),
            (f"SELECT status, COUNT(*) FROM outbox WHERE {UNFINISHED} GROUP BY status", ()),
            (f"SELECT status, COUNT(*) FROM outbox WHERE {SET_ASIDE} GROUP BY status", ()),
            (f"SELECT id FROM outbox WHERE {SET_ASIDE} ORDER BY id DESC LIMIT 20", ()),
        ]
        for sql, values in reads:
            plan = [
                str(row[-1]) for row in await store.db.fetch(f"EXPLAIN QUERY PLAN {sql}", *values)
            ]
            whole_table = [
                step for step in plan if step.startswith("SCAN outbox") and "INDEX" not in step
            ]
            assert not whole_table, (sql, plan)
    finally:
        await store.close()
