"""The outbox sender on a test clock, on both stores: rows written before sending, per-chat
order, flood control's delay honoured whatever its length, backoff with jitter, dead chunks
and the notice in the next part, and rows that survive a restart (unknown outcomes
included)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from bot.channel_contract import SendFailure, SendFailureKind
from bot.metrics import Metrics
from bot.outbox.sender import Sender, chunk_id
from bot.outbox.writer import Outbox
from bot.store.base import Store
from bot.store.outbox_rows import OutboxRow
from bot.store.postgres import PostgresStore
from bot.store.sqlite import SQLiteStore
from bot.types import Address, OutboundFile, OutboundMessage
from tests.app_harness import RecordingChannel

A = Address("local", "alice")
B = Address("local", "bob")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class FlakyChannel(RecordingChannel):
    """A recording channel whose next sends fail as scripted (one failure per send), and
    whose first send of a given text fails as `fail_once` says (chats send in parallel)."""

    def __init__(self) -> None:
        super().__init__()
        self.failures: list[SendFailure | None] = []
        self.fail_once: dict[str, SendFailure] = {}
        self.attempts: list[str] = []

    async def deliver(self, out: OutboundMessage) -> str:
        self.attempts.append(out.text)
        failure = self.fail_once.pop(out.text, None)
        if failure is None and self.failures:
            failure = self.failures.pop(0)
        if failure is not None:
            raise failure
        return await super().deliver(out)


class Rig:
    def __init__(
        self,
        store: Store,
        channel: FlakyChannel,
        clock: Clock,
        holder: str = "here",
        gone: Callable[[str], bool] = lambda _holder: False,
    ) -> None:
        self.store = store
        self.channel = channel
        self.clock = clock
        self.metrics = Metrics()
        channels = {"local": channel}
        self.outbox = Outbox(store=store, channels=channels, clock=clock)
        self.sender = Sender(
            store=store,
            channels=channels,
            wakeup=self.outbox.wakeup,
            metrics=self.metrics,
            holder=holder,
            gone=gone,
            clock=clock,
            jitter=lambda: 1.0,  # the full backoff, so the schedule is exact
        )

    async def step(self, advance: float = 0.0) -> float | None:
        self.clock.now += advance
        due = await self.sender.step()
        await self.sender.settle()
        return due


@pytest.fixture
def rig(any_store: Store) -> Rig:
    return Rig(any_store, FlakyChannel(), Clock())


def reopened(store: Store) -> Store:
    """The same database as a restarted process opens it."""
    if isinstance(store, SQLiteStore):
        return SQLiteStore(store.path)
    assert isinstance(store, PostgresStore)
    return PostgresStore(store.url)  # type: ignore[return-value]


async def start_sending_then_die(rig: Rig) -> OutboxRow:
    """Claim the first head and mark it in flight, as a sender does before its platform call;
    then that sender is gone (its outcome never recorded)."""
    (head, *_) = await rig.store.outbox_claim(
        ["local"], "dead sender", rig.clock(), rig.clock() + rig.sender.claim_seconds, 1
    )
    assert await rig.store.outbox_mark_sending(head.id, "dead sender", rig.clock())
    return head


def retry_after(seconds: float) -> SendFailure:
    return SendFailure(SendFailureKind.RETRY_AFTER, "flood control", seconds)


async def test_a_long_retry_after_is_waited_out_then_the_reply_arrives(rig: Rig) -> None:
    rig.channel.failures = [retry_after(90)]
    await rig.outbox.put(A, "t1", ["hello"])
    assert await rig.step() is None  # the failed try is in flight, then rescheduled
    assert await rig.step() == pytest.approx(1090.0)
    assert await rig.step(89.0) == pytest.approx(1090.0)
    assert rig.channel.finals == []
    await rig.step(1.0)
    assert rig.channel.finals == ["hello"]
    assert rig.channel.attempts == ["hello", "hello"]


async def test_a_chats_later_rows_wait_behind_a_failing_one_other_chats_do_not(rig: Rig) -> None:
    rig.channel.fail_once["a1"] = SendFailure(SendFailureKind.TRANSIENT, "502 Bad Gateway")
    await rig.outbox.put(A, "t1", ["a1", "a2"])
    await rig.outbox.put(B, "t2", ["b1"])
    await rig.step()
    assert rig.channel.finals == ["b1"]  # a1 failed; a2 waits behind it
    await rig.step()
    assert rig.channel.finals == ["b1"]
    await rig.step(1.0)
    assert rig.channel.finals == ["b1", "a1"]
    await rig.step()
    assert rig.channel.finals == ["b1", "a1", "a2"]


async def test_transient_failures_back_off_exponentially_with_jitter(rig: Rig) -> None:
    rig.channel.failures = [SendFailure(SendFailureKind.TRANSIENT, "timed out")] * 4
    await rig.outbox.put(A, "t1", ["hi"])
    waits = []
    wait = 0.0
    for _ in range(4):
        await rig.step(wait)  # the try fails
        due = await rig.sender.step()
        assert due is not None
        wait = due - rig.clock.now
        waits.append(wait)
    assert waits == pytest.approx([1.0, 2.0, 4.0, 8.0])
    await rig.step(8.0)
    assert rig.channel.finals == ["hi"]
    rig.sender.jitter = lambda: 0.0  # the shortest wait is half the full one
    rig.channel.failures = [SendFailure(SendFailureKind.TRANSIENT, "timed out")]
    await rig.outbox.put(A, "t2", ["again"])
    await rig.step()
    assert await rig.sender.step() == pytest.approx(rig.clock.now + 0.5)


async def test_a_dead_part_is_reported_in_the_next_part_that_goes_through(rig: Rig) -> None:
    blocked = SendFailure(SendFailureKind.PERMANENT, "Forbidden: bot was blocked by the user")
    rig.channel.failures = [None, blocked]
    await rig.outbox.put(A, "t1", ["one", "two", "three"])
    for _ in range(3):
        await rig.step()
    assert rig.channel.finals == [
        "one",
        "⚠️ Part 2 of 3 could not be delivered: Forbidden: bot was blocked by the user\n\nthree",
    ]
    summary = await rig.store.outbox_summary()
    assert (summary.pending, summary.dead) == (0, 1)
    (dead,) = summary.dead_chunks
    assert (dead.turn_id, dead.chunk_index, dead.chunk_count) == ("t1", 1, 3)
    assert 'krill_outbox_dead_total{channel="local"} 1.0' in rig.metrics.render().decode()
    await rig.step()  # an idle sender's count is current
    assert rig.sender.status_line("any") == "Outbox: 0 chunk(s) waiting · 1 refused for good"


async def test_a_chunk_too_long_for_the_platform_is_split_until_it_fits(rig: Rig) -> None:
    too_long = SendFailure(SendFailureKind.TOO_LONG, "message is too long")
    lines = [f"line {i} " + "x" * 40 for i in range(8)]
    rig.channel.failures = [too_long, too_long]
    await rig.outbox.put(A, "t1", ["\n".join(lines), "next"])
    for _ in range(6):
        await rig.step()
    # Halved, then the first half halved again; what is left goes out as one message (it
    # would be cut again if that were still too long).
    assert rig.channel.finals == ["\n".join(lines[:2]), "\n".join(lines[2:]), "next"]
    rig.channel.failures = [too_long]
    await rig.outbox.put(A, "t2", ["short"])
    await rig.step()
    assert (await rig.store.outbox_summary()).dead == 1  # too short to cut: refused for good


async def test_rows_survive_a_restart_and_one_in_flight_is_sent_again(rig: Rig) -> None:
    await rig.outbox.put(A, "t1", ["one", "two"])
    await start_sending_then_die(rig)
    await rig.store.close()
    store = reopened(rig.store)
    await store.open()
    try:
        gone = {"dead sender"}.__contains__
        restarted = Rig(store, FlakyChannel(), rig.clock, holder="restarted", gone=gone)
        await restarted.sender.start()  # lets go of the dead sender's claim
        await restarted.sender.stop()
        assert (await store.outbox_summary()).pending == 2
        await restarted.step()
        await restarted.step()
        # Without a way to ask the platform, the unknown send is made again.
        assert restarted.channel.finals == ["one", "two"]
        assert (await store.outbox_summary()).pending == 0
    finally:
        await store.close()


class LookupChannel(FlakyChannel):
    """A channel that can say whether a chunk id was already sent (as Slack can)."""

    def __init__(self, sent: dict[str, str]) -> None:
        super().__init__()
        self.sent = sent

    async def find_sent(self, out: OutboundMessage) -> str | None:
        return self.sent.get(out.chunk_id)


async def test_an_unknown_send_found_on_the_platform_is_not_sent_again(rig: Rig) -> None:
    await rig.outbox.put(A, "t1", ["one", "two"])
    head = await start_sending_then_die(rig)
    channel = LookupChannel({chunk_id(head, "one"): "m1"})
    restarted = Rig(rig.store, channel, rig.clock, holder="other replica")
    assert await restarted.step(1.0) is None  # the dead sender's claim still holds
    assert channel.attempts == []
    await restarted.step(rig.sender.claim_seconds)  # expired: looked up, not sent again
    await restarted.step()
    await restarted.step()
    assert channel.finals == ["two"]


async def test_the_run_loop_delivers_what_is_written(rig: Rig) -> None:
    await rig.sender.start()
    try:
        await rig.outbox.put(A, "t1", ["hello"])
        await asyncio.wait_for(rig.sender.wait_delivered(A), 5)
    finally:
        await rig.sender.stop()
    assert rig.channel.finals == ["hello"]


async def test_a_file_on_a_channel_without_files_dies_and_the_chat_goes_on(
    rig: Rig, tmp_path: Path
) -> None:
    (tmp_path / "a.txt").write_text("x")
    file = OutboundFile(str(tmp_path / "a.txt"), "a.txt", "text/plain", "", "t1", "t1:file:1")
    await rig.outbox.put_file(A, file)
    await rig.outbox.put_file(A, file)  # the same key again is the same row
    await rig.outbox.put(A, "t1", ["after the file"])
    await rig.step()
    await rig.step()
    summary = await rig.store.outbox_summary()
    assert [c.reason for c in summary.dead_chunks] == ["files cannot be sent on local"]
    assert rig.channel.finals == ["after the file"]


async def test_a_dead_row_put_back_in_line_is_sent_once(rig: Rig) -> None:
    rig.channel.failures = [SendFailure(SendFailureKind.PERMANENT, "blocked")]
    await rig.outbox.put(A, "t1", ["hello"])
    await rig.step()
    (dead,) = (await rig.store.outbox_summary()).dead_chunks
    assert await rig.store.outbox_retry_dead(dead.id, rig.clock.now)
    assert not await rig.store.outbox_retry_dead(dead.id, rig.clock.now)  # no longer dead
    await rig.step()
    assert rig.channel.finals == ["hello"]
    assert (await rig.store.outbox_summary()).dead == 0


def timed_out(wait: float = 30.0) -> SendFailure:
    """A send that reached the platform and got no answer within the read timeout `wait`."""
    return SendFailure(SendFailureKind.UNKNOWN, f"no answer within {wait:g}s", wait)


async def test_a_send_that_timed_out_is_waited_out_then_set_aside_not_repeated(
    rig: Rig,
) -> None:
    rig.channel.resend_after_timeout = False  # type: ignore[attr-defined]  # Telegram's default
    rig.channel.failures = [timed_out(30)]
    await rig.outbox.put(A, "t1", ["one", "two"])
    assert await rig.step() is None  # the try times out
    assert await rig.step() == pytest.approx(1030.0)  # waits the timeout again
    assert await rig.step(29.0) == pytest.approx(1030.0)
    assert rig.channel.attempts == ["one"]  # nothing else goes to the chat meanwhile
    await rig.step(1.0)  # decided: maybe sent, not sent again
    await rig.step()
    assert rig.channel.attempts == ["one", rig.channel.finals[0]]
    assert rig.channel.finals == [
        "⚠️ Part 1 of 2 may be missing: it was sent but never confirmed.\n\ntwo"
    ]
    summary = await rig.store.outbox_summary()
    assert (summary.pending, summary.dead, summary.maybe_sent) == (0, 0, 1)
    (maybe,) = summary.maybe_sent_chunks
    assert (maybe.turn_id, maybe.chunk_index, maybe.channel) == ("t1", 0, "local")
    assert "never confirmed" in maybe.reason
    assert 'krill_outbox_maybe_sent_total{channel="local"} 1.0' in rig.metrics.render().decode()
    await rig.step()  # an idle sender's count is current
    assert rig.sender.status_line("any") == (
        "Outbox: 0 chunk(s) waiting · 0 refused for good · 1 maybe sent"
    )


async def test_a_send_that_timed_out_is_sent_again_after_the_wait_when_asked(rig: Rig) -> None:
    rig.channel.resend_after_timeout = True  # type: ignore[attr-defined]
    rig.channel.failures = [timed_out(30)]
    await rig.outbox.put(A, "t1", ["one"])
    await rig.step()
    await rig.step(29.0)
    assert rig.channel.attempts == ["one"]
    await rig.step(1.0)
    assert rig.channel.finals == ["one"]
    assert (await rig.store.outbox_summary()).maybe_sent == 0


async def test_a_send_that_timed_out_is_looked_up_where_the_platform_can_say(rig: Rig) -> None:
    channel = LookupChannel({})
    looked_up = Rig(rig.store, channel, rig.clock)
    channel.failures = [SendFailure(SendFailureKind.UNKNOWN, "Slack did not answer in time")]
    await looked_up.outbox.put(A, "t1", ["one", "two"])
    await looked_up.step()  # the try times out
    assert await looked_up.step() == pytest.approx(1001.0)  # looked up after the backoff
    (head,) = await rig.store.outbox_heads(["local"])
    channel.sent[chunk_id(head, "one")] = "m1"  # it did arrive
    await looked_up.step(1.0)
    await looked_up.step()
    assert channel.attempts == ["one", "two"]  # found, so not sent again
    assert (await rig.store.outbox_summary()).maybe_sent == 0


async def test_a_send_cut_off_by_a_crash_is_still_sent_again_where_timeouts_are_not(
    rig: Rig,
) -> None:
    await rig.outbox.put(A, "t1", ["one"])
    await start_sending_then_die(rig)
    channel = FlakyChannel()
    channel.resend_after_timeout = False  # type: ignore[attr-defined]
    restarted = Rig(rig.store, channel, rig.clock, holder="other replica")
    await restarted.step(rig.sender.claim_seconds)
    assert channel.finals == ["one"]
