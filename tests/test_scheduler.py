"""Tests for bot.scheduler: the pure timing and heartbeat decisions, and end to end with a
short cache TTL: the idle flush before the TTL runs out, jobs surviving a restart, idle
compaction, and the heartbeat."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from bot.context.pipeline import ContextPipeline
from bot.scheduler.heartbeat import HEARTBEAT_JOB, heartbeat_checklist, heartbeat_message
from bot.scheduler.idle import idle_compaction_due, pre_expiry_at, warm_compaction_due
from bot.scheduler.jobs import STARTUP_DELAY_SECONDS, next_periodic_run
from bot.store.base import SessionRow
from bot.transcript import EntryKind
from tests.app_harness import Harness
from tests.fakes.anthropic import FakeAnthropic, Reply

FLUSH_MARK = "[Memory flush"
HEARTBEAT_MARK = "[Heartbeat"
DM_KEY = "agent:main:local:direct:alice"
TTL = 3.0
LEAD = 1.0
SHORT_TTL = f"""
[scheduler]
cache_ttl_seconds = {TTL}
[memory.flush]
idle_lead_seconds = {LEAD}
"""


def row(**fields: Any) -> SessionRow:
    return SessionRow(
        **({"session_id": "s", "session_key": DM_KEY, "is_current": True} | fields),
        created_at=0.0,
        updated_at=0.0,
    )


# --- decisions --------------------------------------------------------------------------------


def test_heartbeat_checklist_ignores_comments_and_blanks() -> None:
    assert heartbeat_checklist("<!--\nexample items\n-->\n\n  \n") == ""
    assert heartbeat_checklist(None) == ""
    assert heartbeat_checklist("<!-- intro -->\n- water the plants\n<!-- unclosed") == (
        "- water the plants"
    )


def test_heartbeat_ok_is_dropped_and_real_text_kept() -> None:
    assert heartbeat_message("HEARTBEAT_OK") is None
    assert heartbeat_message("  HEARTBEAT_OK.\n") is None
    assert heartbeat_message("Water the plants! HEARTBEAT_OK") == "Water the plants!"
    assert heartbeat_message("HEARTBEAT_OK - but the build is red") == "but the build is red"
    assert heartbeat_message("The build is red.") == "The build is red."


def test_periodic_jobs_keep_their_pace_across_restarts() -> None:
    assert next_periodic_run(None, 60, 1000) == 1060
    assert next_periodic_run(990, 60, 1000) == 1050
    assert next_periodic_run(100, 60, 1000) == 1000 + STARTUP_DELAY_SECONDS  # overdue: soon


def test_idle_compaction_waits_for_a_cold_cache_and_a_large_context() -> None:
    big = row(context_tokens=30_000, last_model_call_at=100.0)
    assert not idle_compaction_due(big, threshold=20_000, ttl_seconds=300, now=399)
    assert idle_compaction_due(big, threshold=20_000, ttl_seconds=300, now=400)
    small = row(context_tokens=10_000, last_model_call_at=100.0)
    assert not idle_compaction_due(small, threshold=20_000, ttl_seconds=300, now=1000)
    assert not idle_compaction_due(row(context_tokens=30_000), threshold=1, ttl_seconds=1, now=9)


def test_warm_compaction_is_weighed_below_the_threshold_and_forced_above_it() -> None:
    small = row(context_tokens=5_000, last_model_call_at=100.0)
    # No flush due, but warm compaction is on: the pre-expiry moment still comes.
    assert pre_expiry_at(small, 300, 30, flush=False, warm=30_000) == 370.0
    assert pre_expiry_at(small, 300, 30, flush=False, warm=0) is None
    assert pre_expiry_at(row(context_tokens=5_000), 300, 30, flush=False, warm=30_000) is None
    assert not warm_compaction_due(small, 30_000)  # weighed by price, not forced
    assert warm_compaction_due(row(context_tokens=30_000), 30_000)
    assert not warm_compaction_due(row(context_tokens=90_000), 0)


# --- end to end -------------------------------------------------------------------------------


def flush_script(fake: FakeAnthropic, arrivals: list[float]) -> None:
    """Default replies: a flush writes one note then goes quiet; anything else says ok."""

    def handler(body: dict[str, Any]) -> Any:
        last = body["messages"][-1]["content"]
        text = str(last)
        if FLUSH_MARK in text and not any(b.get("type") == "tool_result" for b in last):
            arrivals.append(time.time())
            return Reply.tool_use("memory_append", {"text": "Alice is learning Portuguese"})
        if any(isinstance(b, dict) and b.get("type") == "tool_result" for b in last):
            return "NO_REPLY"
        return "ok"

    fake.default_handler = handler


async def wait_until(predicate: Any, within: float) -> None:
    deadline = time.time() + within
    while not predicate():
        assert time.time() < deadline, "timed out waiting"
        await asyncio.sleep(0.05)


T = TypeVar("T")


async def eventually(
    probe: Callable[[], Awaitable[T]], ok: Callable[[T], bool], within: float
) -> T:
    """Poll `probe` until `ok` holds for what it returns; return that value."""
    deadline = time.time() + within
    while not ok(value := await probe()):
        assert time.time() < deadline, f"timed out waiting; last value: {value!r}"
        await asyncio.sleep(0.05)
    return value


async def flushed(h: Harness) -> SessionRow:
    """The session row once its flush has finished and been counted."""
    assert h.app is not None
    store = h.app.store
    row = await eventually(
        lambda: store.current_session(DM_KEY), lambda r: bool(r and r.memory_flush_count), 5
    )
    assert row is not None
    return row


async def test_idle_session_is_flushed_before_its_cache_expires(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    arrivals: list[float] = []
    flush_script(fake_anthropic, arrivals)
    async with Harness(tmp_path, fake_anthropic.url, SHORT_TTL) as h:
        await h.send("I started learning Portuguese this week")
        turn = await h.app.store.current_session(DM_KEY)
        await wait_until(lambda: arrivals, within=TTL + 2)
        await wait_until(lambda: len(fake_anthropic.message_requests) >= 3, within=2)
        after = await flushed(h)
        note = (h.workspace / "memory").rglob("*.md")
    assert arrivals[0] < turn.last_model_call_at + TTL  # the cache was still warm
    assert arrivals[0] >= turn.last_model_call_at + TTL - LEAD - 0.5
    assert h.channel.finals == ["ok"]  # the flush showed nothing
    assert any("Portuguese" in p.read_text() for p in note)
    assert after.memory_flush_count == 1 and after.memory_flush_at is not None
    assert after.memory_flush_compaction_count is None  # idle flushes leave the cycle open
    assert len(arrivals) == 1  # flushed once; nothing new to flush since


async def test_restart_keeps_the_scheduled_flush(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    arrivals: list[float] = []
    flush_script(fake_anthropic, arrivals)
    async with Harness(tmp_path, fake_anthropic.url, SHORT_TTL) as h:
        await h.send("note: the server room code changed")
        turn = await h.app.store.current_session(DM_KEY)
    stopped = time.time()
    assert not arrivals  # stopped before the job was due
    async with Harness(tmp_path, fake_anthropic.url, SHORT_TTL) as h2:
        await h2.send("/status")
        status = h2.channel.finals[-1]
        await wait_until(lambda: arrivals, within=TTL + 2)
        after = await flushed(h2)
    assert "idle flush in" in status
    assert stopped < arrivals[0] < turn.last_model_call_at + TTL
    assert after.memory_flush_count == 1


async def test_large_idle_session_is_compacted_after_its_cache_expires(
    tmp_path: Path, fake_anthropic: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    arrivals: list[float] = []
    flush_script(fake_anthropic, arrivals)
    compacted: list[tuple[str, float]] = []
    config = """
[agent]
context_window = 50000
[context]
reserve_tokens = 10000
reserve_tokens_floor = 10000
warm_compaction_tokens = 0
[memory.flush]
soft_threshold_tokens = 20000
idle_lead_seconds = 0.5
[scheduler]
cache_ttl_seconds = 1.0
"""

    async def compact_idle(self: ContextPipeline, key: str, prefix: Any) -> str:
        compacted.append((key, time.time()))
        return "compacted"

    monkeypatch.setattr(ContextPipeline, "compact_idle", compact_idle)
    async with Harness(tmp_path, fake_anthropic.url, config) as h:
        await h.send("my notes: " + "alpha beta gamma " * 6000)
        await wait_until(lambda: compacted, within=6)
        last_call = (await h.app.store.current_session(DM_KEY)).last_model_call_at
    assert compacted[0][0] == DM_KEY
    assert compacted[0][1] >= last_call + 1.0  # only once the cache had expired
    assert len(compacted) == 1


COMPACTION_MARK = "[Compaction:"
WARM = """
[context]
warm_compaction_tokens = 1500
keep_recent_user_turns = 1
[scheduler]
cache_ttl_seconds = 4.0
[memory.flush]
idle_lead_seconds = 2.0
"""


async def test_a_large_session_is_flushed_then_compacted_while_its_cache_is_warm(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    arrivals: list[float] = []
    flush_script(fake_anthropic, arrivals)
    flush_handler = fake_anthropic.default_handler
    summaries: list[float] = []

    def handler(body: dict[str, Any]) -> Any:
        prompt = str(body["messages"][-1]["content"])
        if COMPACTION_MARK not in prompt:
            return flush_handler(body)
        summaries.append(time.time())
        return (
            "## Decisions\n- deploy from commit 3f9c2a7d1e0b\n## Open TODOs\n- none\n"
            "## Constraints/Rules\n- none\n## Pending user asks\n- the staging plan\n"
            "## Exact identifiers\n- 3f9c2a7d1e0b"
        )

    fake_anthropic.default_handler = handler
    async with Harness(tmp_path, fake_anthropic.url, WARM) as h:
        await h.send("We deploy from commit 3f9c2a7d1e0b. " + "release notes " * 300)
        await h.send("what is the staging plan? " + "staging checklist " * 300)
        turn = await h.app.store.current_session(DM_KEY)
        await wait_until(lambda: summaries, within=5)
        row = await eventually(
            lambda: h.app.store.current_session(DM_KEY), lambda r: r.compaction_count == 1, 5
        )
        await h.send("and the next step?")
        history = await h.app.store.load_history(row.session_id)
    requests = fake_anthropic.message_requests
    flush = next(r for r in requests if FLUSH_MARK in r.last_user_text)
    summary = next(r for r in requests if COMPACTION_MARK in r.last_user_text)
    # Flushed first, then summarized before the cache expired, over the conversation's own
    # request (same system prompt and tools), so the history was read from the cache.
    assert arrivals[0] <= summaries[0] < turn.last_model_call_at + 4.0
    assert summary.system_text == flush.system_text and summary.tool_names == flush.tool_names
    assert summary.usage["cache_read_input_tokens"] >= 1500
    assert "3f9c2a7d1e0b" in summary.last_user_text  # the identifier guard asked for it
    compaction = next(e for e in history if e.kind == EntryKind.COMPACTION)
    assert compaction.payload.reason == "idle" and "3f9c2a7d1e0b" in compaction.payload.summary
    # The next turn starts from the summary and compacts nothing in front of the person.
    last = requests[-1]
    assert "3f9c2a7d1e0b" in str(last.messages[0]) and "release notes" not in str(last.body)
    assert len(summaries) == 1 and h.channel.finals[-1] == "ok"


async def test_heartbeat_reads_heartbeat_md_and_drops_ok(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    beat = workspace / "HEARTBEAT.md"
    beat.write_text("<!-- nothing to check yet -->\n")
    replies = iter(["HEARTBEAT_OK", "Time to water the plants!"])

    def handler(body: dict[str, Any]) -> str:
        text = str(body["messages"][-1]["content"])
        if HEARTBEAT_MARK in text:
            return next(replies, "HEARTBEAT_OK")
        return "Hi!"

    fake_anthropic.default_handler = handler
    config = "[scheduler]\nheartbeat_minutes = 0.01\n"
    async with Harness(tmp_path, fake_anthropic.url, config) as h:
        await h.send("hello")
        # A beat records its run before it starts, and beats never overlap: so once a second
        # run is recorded, the first (which saw only comments) has finished.
        store = h.app.store
        first = await eventually(lambda: store.job_last_run(HEARTBEAT_JOB), bool, 5)
        await eventually(lambda: store.job_last_run(HEARTBEAT_JOB), lambda t: t != first, 5)
        beats = [r for r in fake_anthropic.message_requests if HEARTBEAT_MARK in r.last_user_text]
        assert beats == []  # comments only: skipped without a model call
        beat.write_text("- Remind Alice to water the plants.\n")
        await wait_until(lambda: len(h.channel.finals) >= 2, within=5)
        last_run = await h.app.store.job_last_run(HEARTBEAT_JOB)
    beats = [r for r in fake_anthropic.message_requests if HEARTBEAT_MARK in r.last_user_text]
    assert len(beats) >= 2 and "water the plants" in beats[0].last_user_text
    assert h.channel.finals[:2] == ["Hi!", "Time to water the plants!"]
    assert last_run is not None and last_run > time.time() - 5


# Far above these sessions: below it, warm compaction runs only when it is the cheaper way.
PRICED = """
[context]
warm_compaction_tokens = 1000000
keep_recent_user_turns = 1
[scheduler]
cache_ttl_seconds = 4.0
[memory.flush]
idle_lead_seconds = 2.0
"""
SUMMARY = (
    "## Decisions\n- deploy from commit 3f9c2a7d1e0b\n## Open TODOs\n- none\n"
    "## Constraints/Rules\n- none\n## Pending user asks\n- the staging plan\n"
    "## Exact identifiers\n- 3f9c2a7d1e0b"
)


def summary_script(fake: FakeAnthropic, arrivals: list[float], summaries: list[float]) -> None:
    """`flush_script`, and a valid summary for every compaction request."""
    flush_script(fake, arrivals)
    flush_handler = fake.default_handler

    def handler(body: dict[str, Any]) -> Any:
        if COMPACTION_MARK not in str(body["messages"][-1]["content"]):
            return flush_handler(body)
        summaries.append(time.time())
        return SUMMARY

    fake.default_handler = handler


async def test_a_session_under_the_threshold_is_compacted_warm_when_that_is_cheaper(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    arrivals: list[float] = []
    summaries: list[float] = []
    summary_script(fake_anthropic, arrivals, summaries)
    async with Harness(tmp_path, fake_anthropic.url, PRICED) as h:
        # A long paste, then a short question: re-writing the paste to the cache on the
        # next burst costs far more than a summary read from the warm cache.
        await h.send("We deploy from commit 3f9c2a7d1e0b. " + "release notes " * 8000)
        await h.send("what is the staging plan?")
        turn = await h.app.store.current_session(DM_KEY)
        assert turn.context_tokens < 1_000_000
        row = await eventually(
            lambda: h.app.store.current_session(DM_KEY), lambda r: r.compaction_count == 1, 8
        )
        await h.send("and the next step?")
    summary = next(
        r for r in fake_anthropic.message_requests if COMPACTION_MARK in r.last_user_text
    )
    assert arrivals[0] <= summaries[0] < turn.last_model_call_at + 4.0  # flushed, then warm
    assert summary.usage["cache_read_input_tokens"] >= 20_000
    assert row.context_tokens < turn.context_tokens // 3
    last = fake_anthropic.message_requests[-1]
    assert "3f9c2a7d1e0b" in str(last.messages[0]) and "release notes" not in str(last.body)
    assert len(summaries) == 1 and h.channel.finals[-1] == "ok"


async def test_a_session_under_the_threshold_is_left_alone_when_a_summary_costs_more(
    tmp_path: Path, fake_anthropic: FakeAnthropic, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="bot.scheduler.idle")
    arrivals: list[float] = []
    summaries: list[float] = []
    summary_script(fake_anthropic, arrivals, summaries)
    async with Harness(tmp_path, fake_anthropic.url, PRICED) as h:
        # Most of the context is the turn compaction would keep anyway.
        await h.send("We deploy from commit 3f9c2a7d1e0b.")
        await h.send("what is the staging plan? " + "staging checklist " * 3000)
        await wait_until(lambda: "Not compacted" in caplog.text, within=8)
        row = await h.app.store.current_session(DM_KEY)
    assert arrivals  # the flush ran at the pre-expiry moment; the compaction was weighed
    assert summaries == [] and row.compaction_count == 0
    assert not any(COMPACTION_MARK in r.last_user_text for r in fake_anthropic.message_requests)
