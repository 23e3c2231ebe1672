"""Two outbox senders (two replicas) on one store: a burst of replies to many chats goes
out with every chunk sent once and each chat's chunks in order, both senders at work; a
sender that dies mid-send leaves its row to the other once its claim expires."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from bot.metrics import Metrics
from bot.outbox.sender import MAX_PARALLEL_CHATS, Sender
from bot.outbox.writer import Outbox
from bot.store.base import Store
from bot.types import Address, OutboundMessage
from tests.app_harness import RecordingChannel

# More chats than one sender sends to at once, so the other must find work too (each
# sender's first sends wait until both are sending).
CHATS = MAX_PARALLEL_CHATS + 8
CHUNKS = 4


@dataclass
class SharedChat(RecordingChannel):
    """One replica's channel: records into the list both replicas share; the first sends
    wait until both replicas are sending, so both must have claimed rows."""

    replica: str = ""
    sent: list[tuple[str, str, str]] = field(default_factory=list)  # replica, chat, text
    busy: set[str] = field(default_factory=set)
    both_busy: asyncio.Event = field(default_factory=asyncio.Event)

    async def deliver(self, out: OutboundMessage) -> str:
        self.busy.add(self.replica)
        if len(self.busy) == 2:
            self.both_busy.set()
        await self.both_busy.wait()
        self.sent.append((self.replica, out.address.chat_id, out.text))
        await asyncio.sleep(0.001)  # other sends go on meanwhile
        return await super().deliver(out)


def replica(
    store: Store, name: str, channel: RecordingChannel, claim_seconds: float = 5.0
) -> tuple[Outbox, Sender]:
    channels = {"local": channel}
    outbox = Outbox(store=store, channels=channels)
    sender = Sender(
        store=store,
        channels=channels,
        wakeup=outbox.wakeup,
        metrics=Metrics(),
        holder=name,
        claim_seconds=claim_seconds,
        poll_seconds=0.05,
    )
    return outbox, sender


async def test_two_senders_deliver_a_burst_once_and_in_order_per_chat(any_store: Store) -> None:
    a = SharedChat(replica="a")
    b = SharedChat(replica="b", sent=a.sent, busy=a.busy, both_busy=a.both_busy)
    outbox_a, sender_a = replica(any_store, "a", a)
    outbox_b, sender_b = replica(any_store, "b", b)
    await sender_a.start()
    await sender_b.start()
    try:
        for chat in range(CHATS):
            writer = outbox_a if chat % 2 else outbox_b  # webhooks land on either replica
            texts = [f"chat {chat} part {i}" for i in range(CHUNKS)]
            await writer.put(Address("local", f"c{chat}"), f"turn-{chat}", texts)
        for chat in range(CHATS):
            await asyncio.wait_for(sender_a.wait_delivered(Address("local", f"c{chat}")), 30)
    finally:
        await sender_a.stop()
        await sender_b.stop()
    sent = a.sent
    texts = [text for _, _, text in sent]
    assert len(texts) == len(set(texts)) == CHATS * CHUNKS  # each chunk once
    for chat in range(CHATS):
        assert [t for _, c, t in sent if c == f"c{chat}"] == [
            f"chat {chat} part {i}" for i in range(CHUNKS)
        ]
    assert {name for name, _, _ in sent} == {"a", "b"}
    assert (await any_store.outbox_summary()).pending == 0


class Unanswered(RecordingChannel):
    """A platform that never answers: the send is in flight when its replica dies."""

    def __init__(self) -> None:
        super().__init__()
        self.called = asyncio.Event()

    async def deliver(self, out: OutboundMessage) -> str:
        self.called.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


class Lookup(RecordingChannel):
    """A platform Krill can ask whether a chunk went out (as Slack can): it did not."""

    def __init__(self) -> None:
        super().__init__()
        self.looked_up: list[str] = []

    async def find_sent(self, out: OutboundMessage) -> str | None:
        self.looked_up.append(out.text)
        return None


async def test_a_row_a_dead_sender_left_is_checked_then_sent_by_the_other(
    any_store: Store,
) -> None:
    where = Address("local", "alice")
    dying = Unanswered()
    outbox_a, sender_a = replica(any_store, "a", dying, claim_seconds=0.5)
    survivor = Lookup()
    _, sender_b = replica(any_store, "b", survivor, claim_seconds=0.5)
    await sender_a.start()
    await outbox_a.put(where, "t1", ["hello", "again"])
    await asyncio.wait_for(dying.called.wait(), 10)
    assert sender_a._task is not None
    sender_a._task.cancel()  # the replica dies: nothing more it does reaches the store
    for task in list(sender_a._in_flight.values()):
        task.cancel()
    await sender_b.start()
    try:
        await asyncio.wait_for(sender_b.wait_delivered(where), 10)
    finally:
        await sender_b.stop()
    assert survivor.looked_up == ["hello"]
    assert [d.text for d in survivor.deliveries] == ["hello", "again"]
