"""A store another process keeps locked, with the real `krill run`: a turn waits out the lock
and answers once; when the lock outlasts `storage.busy_wait_seconds` the person is told,
and the message is answered once: by the next start, or by the running process once the
session's lease shows nobody is working on it."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bot.errors import StoreUnavailable
from tests.fakes.anthropic import FakeAnthropic, Reply
from tests.krill_process import KrillProcess


@contextmanager
def write_lock(db_path: Path) -> Iterator[None]:
    """What an operator's `sqlite3` shell does with BEGIN IMMEDIATE: hold the write lock."""
    db = sqlite3.connect(db_path, isolation_level=None, timeout=10)
    try:
        db.execute("BEGIN IMMEDIATE")
        yield
        db.execute("ROLLBACK")
    finally:
        db.close()


async def test_a_20_second_write_lock_during_a_turn_delays_the_reply_once(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    env = fake_anthropic.env()
    db_path = tmp_path / "data" / "krill.db"
    answered_at: list[float] = []
    fake_anthropic.queue_text("here I am")
    fake_anthropic.queue_text("still here")
    async with KrillProcess(tmp_path, {}, env) as krill:
        fake_anthropic.hold()
        chat = asyncio.create_task(krill.chat("are you there?"))
        chat.add_done_callback(lambda _t: answered_at.append(time.monotonic()))
        await fake_anthropic.wait_for_requests(1, within=10)
        with write_lock(db_path):
            fake_anthropic.release()  # the reply now needs the store that is locked
            await asyncio.sleep(20)
            released_at = time.monotonic()
        result = await asyncio.wait_for(chat, 30)
    assert result["replies"] == ["here I am"]
    assert answered_at[0] >= released_at
    assert "database is locked by another process; waiting" in krill.log()

    # Nothing was left unanswered, so a restart answers nothing a second time.
    async with KrillProcess(tmp_path, {}, env) as again:
        second = await again.chat("and now?")
    assert second["replies"] == ["still here"]
    assert "accepted before the last shutdown" not in again.log()
    assert len(fake_anthropic.message_requests) == 2


async def test_a_lock_beyond_the_wait_tells_the_person_and_the_next_start_answers(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    env = fake_anthropic.env()
    config = {"storage": {"busy_wait_seconds": 1}}
    db_path = tmp_path / "data" / "krill.db"
    fake_anthropic.queue(Reply.text("answer one"), times=2)  # asked again after the restart
    fake_anthropic.queue_text("answer two")
    async with KrillProcess(tmp_path, config, env) as krill:
        fake_anthropic.hold()
        chat = asyncio.create_task(krill.chat("first question"))
        await fake_anthropic.wait_for_requests(1, within=10)
        with write_lock(db_path):
            fake_anthropic.release()
            result = await asyncio.wait_for(chat, 30)
        assert result["replies"] == [StoreUnavailable.user_message]

    async with KrillProcess(tmp_path, config, env) as again:
        await fake_anthropic.wait_for_requests(2, within=15)
        second = await again.chat("second question")
        status, history = await again.get("/api/history?name=tester")
    # The resumed answer may still be going out as the second message arrives: never after.
    assert second["replies"] in (["answer two"], ["answer one", "answer two"])
    assert status == 200
    texts = [line["text"] for line in json.loads(history)["messages"]]
    assert texts == ["first question", "answer one", "second question", "answer two"]
    assert "answering 1 message(s) accepted before the last shutdown" in again.log()


async def test_a_message_left_by_a_store_that_gave_up_is_answered_without_a_restart(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    config = {"storage": {"busy_wait_seconds": 1, "lease_seconds": 1}}
    fake_anthropic.queue(Reply.text("answer one"), times=2)
    async with KrillProcess(tmp_path, config, fake_anthropic.env()) as krill:
        fake_anthropic.hold()
        chat = asyncio.create_task(krill.chat("first question"))
        await fake_anthropic.wait_for_requests(1, within=10)
        with write_lock(tmp_path / "data" / "krill.db"):
            fake_anthropic.release()
            result = await asyncio.wait_for(chat, 30)
        assert result["replies"] == [StoreUnavailable.user_message]
        await fake_anthropic.wait_for_requests(2, within=15)
        texts: list[str] = []
        async with asyncio.timeout(15):
            while "answer one" not in texts:
                _status, history = await krill.get("/api/history?name=tester")
                texts = [line["text"] for line in json.loads(history)["messages"]]
                await asyncio.sleep(0.2)
    assert texts == ["first question", "answer one"]
    assert len(fake_anthropic.message_requests) == 2
