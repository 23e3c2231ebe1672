"""End to end with the real `krill run` against the fake Anthropic: context management that
holds for a second model, a failing or hanging summarizer, and two replicas.

- A session switched with `/model` compacts with that model on every summarizer request,
  and its warm in-place summary reads the cache its turns wrote.
- A summarizer that always fails costs at most three calls (the breaker opens), and every
  turn is still answered, under the window the fake enforces.
- A summarizer that hangs holds a turn for the compaction deadline, not for the API timeout.
- Two replicas on one PostgreSQL answering one session in turn send the same pruned prefix.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from bot.context.compaction.prompts import IN_PLACE_PROMPT, SUMMARIZER_SYSTEM
from bot.context.fallback import CUT_NOTE
from bot.context.pruning import TRIM_NOTE
from tests.fakes.anthropic import ErrorReply, FakeAnthropic, RecordedRequest, Reply
from tests.krill_process import KrillProcess, run_cli
from tests.test_context_e2e import strip, text_of

Body = dict[str, Any]
SONNET, HAIKU = "claude-sonnet-4-6", "claude-haiku-4-5"
IN_PLACE_MARK = IN_PLACE_PROMPT.split("]", 1)[0]
REQUIRED_MARK = "copy each one exactly under ## Exact identifiers:\n"
FILLER = "Some background on the migration plan that makes this message long. " * 50


def in_place(body: Body) -> bool:
    return any(IN_PLACE_MARK in text_of(m["content"]) for m in body["messages"])


def is_summarizer(body: Body) -> bool:
    return text_of(body.get("system")) == SUMMARIZER_SYSTEM or in_place(body)


def summary(body: Body) -> str:
    """Five sections and every identifier the prompt asks for."""
    prompt = text_of(body["messages"][-1]["content"])
    ids = prompt.split(REQUIRED_MARK, 1)[1].split("\n\n", 1)[0] if REQUIRED_MARK in prompt else ""
    return (
        "## Decisions\n- none\n## Open TODOs\n- none\n## Constraints/Rules\n- none\n"
        "## Pending user asks\n- background on the migration plan, this long message\n"
        "## Exact identifiers\n" + ids
    )


def summarizer_requests(fake: FakeAnthropic) -> list[RecordedRequest]:
    return [r for r in fake.message_requests if is_summarizer(r.body)]


def chat_requests(fake: FakeAnthropic) -> list[RecordedRequest]:
    return [r for r in fake.message_requests if not is_summarizer(r.body)]


def config(**sections: dict[str, Any]) -> dict[str, Any]:
    """A small window so thresholds come in a few turns; the memory flush off unless asked."""
    base: dict[str, Any] = {
        "agent": {"context_window": 20_000, "sender_turns_per_minute": 0},
        "anthropic": {"max_retries": 0},
        "context": {"reserve_tokens": 4_000, "reserve_tokens_floor": 4_000},
        "memory": {"enabled": False},
        "scheduler": {"idle_compaction": False},
    }
    for name, section in sections.items():
        base[name] = base.get(name, {}) | section
    return base


async def status(krill: KrillProcess) -> dict[str, Any]:
    code, out, err = await run_cli(
        krill.directory, "status", "--json", "--config", str(krill.config_path)
    )
    assert code == 0, err
    (session,) = json.loads(out)["sessions"]
    return dict(session)


async def until(check: Any, within: float, what: str) -> None:
    async with asyncio.timeout(within):
        while not check():  # noqa: ASYNC110
            await asyncio.sleep(0.05)
    assert check(), what


async def test_a_session_on_a_second_model_compacts_with_it_and_reads_its_cache(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    fake = fake_anthropic
    fake.default_handler = lambda body: summary(body) if is_summarizer(body) else "Noted."
    settings = config(
        agent={"model": SONNET, "models": [SONNET, HAIKU], "context_window": 40_000},
        models={HAIKU: {"context_window": 20_000}},
        context={"warm_compaction_tokens": 2_000},
        # The memory flush runs before each compaction and in the idle gap, on Haiku too.
        memory={"enabled": True},
        scheduler={"idle_compaction": True, "cache_ttl_seconds": 6.0},
    )
    settings["memory"] |= {"flush": {"idle_lead_seconds": 3.0}}
    async with KrillProcess(tmp_path, settings, fake.env()) as krill:
        switched = await krill.chat(f"/model {HAIKU}")
        assert HAIKU in str(switched["replies"])
        # Past Haiku's smaller window (16k tokens with the reserve; Sonnet's would be 36k).
        for i in range(20):
            await krill.chat(f"Message {i}. {FILLER}")
        assert summarizer_requests(fake), "the conversation never compacted on Haiku's window"
        assert (await status(krill))["compaction"]["window"] == 20_000
        for i in range(20, 24):
            await krill.chat(f"Message {i}. {FILLER}")
        # Idle: shortly before the cache expires the session is compacted in place.
        await until(
            lambda: any(in_place(r.body) and r.usage for r in fake.message_requests),
            within=30,
            what="no warm compaction ran",
        )
        await until(lambda: "warm compaction of" in krill.log(), 10, "warm compaction not logged")
    summaries = summarizer_requests(fake)
    assert {r.body["model"] for r in fake.message_requests} == {HAIKU}
    warm = next(r for r in summaries if in_place(r.body))
    assert warm.usage is not None
    # The history came from the cache its turns wrote; only the summary prompt is new.
    assert warm.usage["cache_read_input_tokens"] > 5_000
    assert warm.usage["cache_creation_input_tokens"] < 2_000


async def test_a_summarizer_that_always_fails_costs_three_calls_and_every_turn_is_answered(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    fake = fake_anthropic
    fake.context_window = 20_000  # the fake refuses what the real API would

    def answer(body: Body) -> Any:
        if is_summarizer(body):
            return ErrorReply(500, "api_error", "summarizer down", {"x-should-retry": "false"})
        return "Noted."

    fake.default_handler = answer
    async with KrillProcess(tmp_path, config(), fake.env()) as krill:
        for i in range(14):  # up to the threshold (16k tokens)
            await krill.chat(f"Message {i}. {FILLER}")
        replies = [await krill.chat(f"Message {i}. {FILLER}") for i in range(14, 24)]
        assert [r["replies"] for r in replies] == [["Noted."]] * 10
        assert 1 <= len(summarizer_requests(fake)) <= 3
        # Each failure leaves the oldest turns out, so the context grows back to the
        # threshold a few turns later; the third failure in a row pauses compaction.
        replies = [await krill.chat(f"Message {i}. {FILLER}") for i in range(24, 44)]
        session = await status(krill)
        _, metrics = await krill.get("/metrics")
    assert [r["replies"] for r in replies] == [["Noted."]] * 20
    assert len(summarizer_requests(fake)) == 3
    assert [r for r in fake.message_requests if r.usage is None and not is_summarizer(r.body)] == []
    breaker = session["compaction"]
    assert breaker["failures"] == 3 and breaker["paused_until"] is not None
    assert 'krill_compaction_failures_total{cause="error"} 3.0' in metrics
    # Meanwhile the oldest turns were left out of the requests, and the requests said so.
    last = chat_requests(fake)[-1].body["messages"]
    assert text_of(last[0]["content"]).startswith(CUT_NOTE.split("{", 1)[0])
    assert "Message 43." in text_of(last[-1]["content"])


DEADLINE = 3.0
HANG = 120.0  # far past the deadline, far below anthropic.timeout (600 s)


async def test_a_hanging_summarizer_holds_a_turn_for_the_deadline_not_the_api_timeout(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    fake = fake_anthropic

    async def answer(body: Body) -> Any:
        if is_summarizer(body):
            await asyncio.sleep(HANG)
        return "Noted."

    fake.default_handler = answer
    settings = config(context={"compaction_timeout_seconds": DEADLINE})
    async with KrillProcess(tmp_path, settings, fake.env()) as krill:
        took = []
        for i in range(18):
            started = time.monotonic()
            reply = await krill.chat(f"Message {i}. {FILLER}")
            took.append(time.monotonic() - started)
            assert reply["replies"] == ["Noted."]
            if summarizer_requests(fake):
                break
        session = await status(krill)
        assert "took longer than 3 s" in krill.log()
    assert summarizer_requests(fake), "no turn reached the compaction threshold"
    # The turn that compacted waited for the deadline, then answered with one more call;
    # no turn waited for the hanging request itself.
    assert DEADLINE <= took[-1] < DEADLINE + 30 < HANG
    assert session["compaction"]["failures"] == 1


TTL = 5.0
PAGE_LINES = 200  # ~14,000 characters a page


@pytest.fixture
async def pages() -> AsyncIterator[str]:
    """A loopback web server of long pages, for web_fetch to read."""

    async def page(request: web.Request) -> web.Response:
        n = request.query.get("n", "0")
        lines = [f"page {n} line {i:03d}: " + "status report data " * 3 for i in range(PAGE_LINES)]
        return web.Response(text="\n".join(lines))

    app = web.Application()
    app.router.add_get("/page", page)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield f"http://127.0.0.1:{port}/page"
    await runner.cleanup()


async def test_two_replicas_send_one_session_the_same_pruned_prefix(
    tmp_path: Path, fake_anthropic: FakeAnthropic, pages: str, pg_url: str
) -> None:
    fake = fake_anthropic

    def read_a_page(body: Body) -> Any:
        last = body["messages"][-1]["content"]
        if any(b.get("type") == "tool_result" for b in last):
            return "Read it."
        n = text_of(last).split("Turn ", 1)[1].split(".", 1)[0]
        call = {"type": "tool_use", "id": f"toolu_{n}", "name": "web_fetch"}
        return Reply([{**call, "input": {"url": f"{pages}?n={n}"}}], stop_reason="tool_use")

    fake.default_handler = read_a_page
    settings = config(
        agent={"context_window": 40_000},
        storage={"url": pg_url},
        workspace={"path": str(tmp_path / "workspace")},
        scheduler={"cache_ttl_seconds": TTL},
        # Pages stay whole in the transcript (not kept on disk), so pruning has work to do.
        tools={"web_fetch": {"allow_private": True}, "results": {"threshold_bytes": 100_000}},
    )
    for name in ("a", "b", "workspace"):
        (tmp_path / name).mkdir()
    async with (
        KrillProcess(tmp_path / "a", settings, fake.env()) as one,
        KrillProcess(tmp_path / "b", settings, fake.env()) as other,
    ):
        replicas = [one, other]
        for n in range(4):  # warm: nothing is pruned yet
            assert (await replicas[n % 2].chat(f"Turn {n}. Read today's page."))["replies"]
        await asyncio.sleep(TTL + 0.5)  # the prompt cache expires in the gap
        for n in range(4, 9):  # the first request prunes; the rest follow it, warm
            assert (await replicas[n % 2].chat(f"Turn {n}. Read today's page."))["replies"]
    bodies = [strip(r.body) for r in chat_requests(fake)]
    trim = TRIM_NOTE.strip().split("{", 1)[0]
    first = next(i for i, b in enumerate(bodies) if trim in json.dumps(b))
    pruned = bodies[first]["messages"]
    assert len(bodies) - first == 10, "expected two requests a turn, none refused"
    for later in bodies[first + 1 :]:
        assert json.dumps(later["messages"][: len(pruned)]) == json.dumps(pruned)
        assert later["system"] == bodies[first]["system"]
