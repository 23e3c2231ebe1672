"""End to end: several real `krill run` replicas on one shared store (PostgreSQL, and one
SQLite file as replicas on one host may share), Telegram webhooks spread across them
round-robin as a load balancer does.

A burst over several chats alternates between three replicas and one of them is killed with
SIGKILL while its turns are in flight: every message is still answered exactly once and in
order per chat (the survivors take over the dead replica's sessions once its leases expire,
and an update it never acknowledged is redelivered to another replica). A memory note one
replica writes is found by a search on another.

(Telegram polling leadership and scheduled work running once have their own tests.)
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.telegram import FakeTelegram
from tests.replica_set import ReplicaSet, replica_config, token
from tests.replica_storage import STORES, storage_url

CHATS = [7001, 7002, 7003, 7004, 7005]  # five: with three replicas each chat alternates
MESSAGES = 8
KILLED = 1
TIMEOUT = 90.0


@pytest.fixture(params=STORES)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """One PostgreSQL database, or one SQLite file (replicas on one host may share that)."""
    return storage_url(request, tmp_path)


@pytest.fixture
async def fakes() -> AsyncIterator[tuple[FakeTelegram, FakeAnthropic]]:
    async with FakeTelegram() as tg, FakeAnthropic() as model:
        yield tg, model


async def started(
    tmp_path: Path, fakes: tuple[FakeTelegram, FakeAnthropic], store_url: str, count: int
) -> ReplicaSet:
    tg, model = fakes
    return await ReplicaSet(tmp_path, tg, model, replica_config(tg, store_url), count).start()


async def test_a_burst_survives_a_replica_killed_mid_turn_answered_once_in_order(
    tmp_path: Path, fakes: tuple[FakeTelegram, FakeAnthropic], store_url: str
) -> None:
    tg, model = fakes
    model.delay = 0.3  # every turn is still running when the next round is acknowledged
    replicas = await started(tmp_path, fakes, store_url, 3)
    acked_by: dict[tuple[int, int], int] = {}
    try:
        async with aiohttp.ClientSession() as http:
            for n in range(MESSAGES + 1):
                if n == MESSAGES // 2:
                    on_dead = [
                        (chat, m)
                        for (chat, m), replica in acked_by.items()
                        if replica == KILLED and m not in replicas.answered(chat)
                    ]
                    assert on_dead, "the replica to kill has no unanswered message"
                    await replicas.kill(KILLED)
                if n == MESSAGES:
                    # The sentinels: once each is answered, everything before it was handled,
                    # so a message answered twice would have shown by then.
                    await replicas.wait_answered(CHATS, MESSAGES, TIMEOUT)
                # Each chat's next message only once the last was acknowledged, as Telegram
                # delivers one chat's updates in order.
                updates = [tg.private_message(chat, f"say {token(chat, n)}") for chat in CHATS]
                acks = await asyncio.gather(*(replicas.post_update(http, u) for u in updates))
                acked_by |= {(chat, n): replica for chat, replica in zip(CHATS, acks, strict=True)}
        await replicas.wait_answered(CHATS, MESSAGES + 1, TIMEOUT)
        for chat in CHATS:
            assert replicas.answered(chat) == list(range(MESSAGES + 1)), (
                f"chat {chat}: {tg.sent_texts(chat)}\n{replicas.logs()}"
            )
        assert {replica for (_, n), replica in acked_by.items() if n < MESSAGES // 2} == {0, 1, 2}
    finally:
        await replicas.stop()


async def test_a_memory_note_written_through_one_replica_is_found_on_another(
    tmp_path: Path, fakes: tuple[FakeTelegram, FakeAnthropic], store_url: str
) -> None:
    # Through the memory tools and webhooks; tests/test_memory_replicas_e2e.py has recall
    # and `krill memory search`.
    tg, model = fakes
    chat = 7101
    replicas = await started(tmp_path, fakes, store_url, 2)

    def in_chat(params: dict[str, object]) -> bool:
        return str(params.get("chat_id")) == str(chat)

    try:
        async with aiohttp.ClientSession() as http:
            model.queue_tool_use("memory_append", {"text": "The gate code is kiwi-4711."})
            assert await replicas.post_update(http, tg.private_message(chat, "note it"), 0) == 0
            await tg.wait_for("sendMessage", 1, TIMEOUT, in_chat, successful=True)
            model.queue_tool_use("memory_search", {"query": "gate code"})
            asked = tg.private_message(chat, "what is the gate code?")
            assert await replicas.post_update(http, asked, 1) == 1
            await tg.wait_for("sendMessage", 2, TIMEOUT, in_chat, successful=True)
        found = tg.bot_messages(chat)[1]["text"]
        # The echo of the search's tool result: the note, found in replica 1's index.
        assert "1 result(s) for 'gate code'" in found and "kiwi-4711" in found, found
    finally:
        await replicas.stop()
