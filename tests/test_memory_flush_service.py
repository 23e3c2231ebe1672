"""Tests for bot.memory.flush_service and bot.memory.recall, end to end with the fake model:
remembering, recall after /reset, group privacy, the threshold flush, a failing flush, and
the overflow retry."""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path
from typing import Any

from bot.context.messages import RECALL_HEADER
from bot.memory.flush_service import OVERFLOW_HISTORY_TURNS
from bot.transcript import MemoryFlushRecord
from bot.types import ChatType
from tests.app_harness import Harness, message
from tests.fakes.anthropic import FakeAnthropic

FLUSH_MARK = "[Memory flush"
DM_KEY = "agent:main:local:direct:alice"
ALICE_NOTES = "memory/people/local-alice"  # what Alice's DMs learn stays in her folder


def today() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")


def flush_requests(fake: FakeAnthropic) -> list[Any]:
    return [r for r in fake.message_requests if FLUSH_MARK in r.last_user_text]


# --- end to end -------------------------------------------------------------------------------


async def test_remember_reset_and_recall(tmp_path: Path, fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.queue_tool_use(
        "memory_append", {"text": "Alice's coffee order: oat flat white, no sugar"}
    )
    fake_anthropic.queue_text("Noted!")
    fake_anthropic.queue_text("NO_REPLY")  # the flush before /reset has nothing new
    fake_anthropic.queue_text("An oat flat white.")
    async with Harness(tmp_path, fake_anthropic.url) as h:
        await h.send("remember that my coffee order is an oat flat white")
        note = h.workspace / ALICE_NOTES / f"{today()}.md"
        assert "oat flat white, no sugar" in note.read_text()
        old = await h.app.store.current_session(DM_KEY)
        await h.send("/reset")
        await h.send("what's my usual coffee order?")
        flushed = await h.app.store.get_session(old.session_id)
        records = [
            e.payload
            for e in await h.app.store.transcript(old.session_id)
            if isinstance(e.payload, MemoryFlushRecord)
        ]
    assert h.channel.finals[0] == "Noted!"
    assert h.channel.finals[1].startswith("✅ New session started")
    assert h.channel.finals[2:] == ["An oat flat white."]  # the flush said nothing
    assert len(flush_requests(fake_anthropic)) == 1
    assert flushed.memory_flush_at is not None and flushed.memory_flush_count == 1
    assert records and records[0].reason == "reset" and records[0].ok
    question = fake_anthropic.message_requests[-1]
    assert RECALL_HEADER in question.last_user_text
    assert "oat flat white, no sugar" in question.last_user_text
    assert f"{ALICE_NOTES}/{today()}.md#L3-L3" in question.last_user_text
    assert "remember that" not in str(question.messages)  # a fresh session


async def test_group_sessions_never_receive_memory_md(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    workspace = tmp_path / "workspace"
    (workspace / "memory").mkdir(parents=True)
    (workspace / "MEMORY.md").write_text("- Private: Alice secretly loves durian candy.\n")
    (workspace / "memory" / "shared").mkdir()
    (workspace / "memory" / "shared" / "events.md").write_text(
        "- The durian festival is on Friday.\n"
    )
    fake_anthropic.queue_tool_use("memory_get", {"path": "MEMORY.md"})
    fake_anthropic.queue_text("The durian festival is on Friday!")
    fake_anthropic.queue_text("You love durian candy.")
    async with Harness(tmp_path, fake_anthropic.url) as h:
        group = message(
            "any durian candy plans?",
            user="bob",
            chat_type=ChatType.GROUP,
            chat_id="team",
            mentioned=True,
        )
        await h.send(group)
        await h.send("durian candy?")
    first, second, dm = fake_anthropic.message_requests
    for request in (first, second):
        assert "secretly" not in request.system_text
        assert "secretly" not in str(request.messages)
    assert "durian festival is on Friday" in first.last_user_text  # shared notes are fine
    result = second.messages[-1]["content"][0]
    assert result["type"] == "tool_result" and result["is_error"] is True
    assert "not part of this conversation" in str(result["content"])
    assert "secretly loves durian" in dm.system_text
    assert "secretly loves durian" in dm.last_user_text  # recall may use it in a DM


NEAR_THRESHOLD = """
[agent]
context_window = 50000
[context]
reserve_tokens = 10000
reserve_tokens_floor = 10000
[memory.flush]
soft_threshold_tokens = 20000
"""


async def test_threshold_flush_runs_once_silently(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.queue_text("Hi!")
    fake_anthropic.queue_tool_use("memory_append", {"text": "Alice plans a Kyoto trip in May"})
    fake_anthropic.queue_text("NO_REPLY")
    fake_anthropic.queue_text("That is a lot of notes.")
    fake_anthropic.queue_text("Sure.")
    fake_anthropic.queue_text("Again.")
    async with Harness(tmp_path, fake_anthropic.url, NEAR_THRESHOLD) as h:
        await h.send("hello")
        await h.send("Here are my trip notes: " + "Kyoto temples and gardens. " * 3000)
        await h.send("thanks")
        await h.send("one more")
        row = await h.app.store.current_session(DM_KEY)
        note = (h.workspace / ALICE_NOTES / f"{today()}.md").read_text()
    assert len(flush_requests(fake_anthropic)) == 1
    assert h.channel.finals == ["Hi!", "That is a lot of notes.", "Sure.", "Again."]
    assert all("NO_REPLY" not in d.text for d in h.channel.deliveries)  # previews too
    assert "Kyoto trip in May" in note
    assert row.memory_flush_count == 1 and row.memory_flush_compaction_count == 0
    assert row.memory_flush_error is None
    # The flush request read the conversation's prefix: same system prompt as the turns.
    flush = flush_requests(fake_anthropic)[0]
    assert flush.system_text == fake_anthropic.message_requests[0].system_text


async def test_failing_flush_is_recorded_and_never_blocks_the_turn(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.queue_text("Hi!")
    fake_anthropic.queue_error(529, "overloaded_error", "Overloaded", should_retry=False)
    fake_anthropic.queue_text("Got your notes.")
    async with Harness(tmp_path, fake_anthropic.url, NEAR_THRESHOLD) as h:
        await h.send("hello")
        await h.send("notes: " + "lorem ipsum dolor " * 5000)
        row = await h.app.store.current_session(DM_KEY)
    assert h.channel.finals == ["Hi!", "Got your notes."]
    assert row.memory_flush_count == 1 and row.memory_flush_at is None
    assert row.memory_flush_error and "Overloaded" in row.memory_flush_error
    assert row.memory_flush_compaction_count == 0  # no retry before every turn of this cycle


async def test_flush_on_overflow_retries_with_recent_turns(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    turns = OVERFLOW_HISTORY_TURNS + 2
    for i in range(turns):
        fake_anthropic.queue_text(f"reply {i}")
    async with Harness(tmp_path, fake_anthropic.url) as h:
        for i in range(turns):
            await h.send(f"turn {i}: " + "filler words here " * 400)
        last = fake_anthropic.message_requests[-1]
        # The full history plus the prompt no longer fits; the recent turns do.
        fake_anthropic.context_window = fake_anthropic.cache.count_tokens(last.body)
        fake_anthropic.queue_text("NO_REPLY")
        started = time.time()
        await h.send("/new")
        old = (await h.app.store.sessions_for_key(DM_KEY))[0]
    attempts = flush_requests(fake_anthropic)
    assert len(attempts) == 2 and time.time() - started < 10
    assert len(attempts[1].messages) < len(attempts[0].messages)
    assert old.memory_flush_error is None and old.memory_flush_at is not None


async def test_the_flush_threshold_follows_the_window_the_session_learned(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.queue_text("Hi!")
    fake_anthropic.queue_text("NO_REPLY")
    fake_anthropic.queue_text("Got your notes.")
    toml = "[memory.flush]\nsoft_threshold_tokens = 10000\n"
    async with Harness(tmp_path, fake_anthropic.url, toml) as h:  # 200k configured
        await h.send("hello")
        row = await h.app.store.current_session(DM_KEY)
        # The provider said this model takes 50k: the flush is due at 50k - 20k - 10k.
        await h.app.store.learn_context_window(row.session_id, 50_000, "claude-sonnet-4-6")
        await h.send("notes: " + "lorem ipsum dolor " * 4600)  # ~21k tokens
        row = await h.app.store.current_session(DM_KEY)
    assert len(flush_requests(fake_anthropic)) == 1
    assert h.channel.finals == ["Hi!", "Got your notes."]
    assert row.memory_flush_count == 1
