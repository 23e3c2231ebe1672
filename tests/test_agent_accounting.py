"""Tests for bot.agent.accounting: every model call is counted once in the session's counters
and in /metrics, flushes included, and concurrent calls never lose each other's tokens."""

from __future__ import annotations

import asyncio
from pathlib import Path

from bot.agent.accounting import UsageAccountant
from bot.agent.cache_breaks import CacheWatch
from bot.agent.pricing import PriceList
from bot.config import Config
from bot.metrics import Metrics
from bot.sessions.keys import conversation_of_key
from bot.store.base import Store
from bot.types import CostKind, Usage
from tests.app_harness import Harness
from tests.fakes.anthropic import FakeAnthropic

KEY = "agent:main:local:direct:alice"
FLUSH_MARK = "[Memory flush"


def metric(metrics: Metrics, kind: str) -> float:
    for line in metrics.render().decode().splitlines():
        if line.startswith(f'krill_tokens_total{{kind="{kind}"}}'):
            return float(line.split()[-1])
    return 0.0


async def test_concurrent_charges_are_all_counted(any_store: Store) -> None:
    store = any_store
    session = await store.get_or_create_session(KEY, conversation_of_key(KEY))
    metrics = Metrics()
    watch = CacheWatch(metrics=metrics, ttl_seconds=300, clock=lambda: 1000.0)
    accountant = UsageAccountant(
        config=Config(),
        store=store,
        metrics=metrics,
        prices=PriceList({}, "5m"),
        clock=lambda: 1000.0,
        cache_watch=watch,
    )
    usage = Usage(input_tokens=3, output_tokens=5, cache_read_tokens=7, cache_write_tokens=11)
    await asyncio.gather(
        *(
            accountant.charge(
                session, usage, "claude-x", kind=CostKind.FLUSH, read_cache=i % 2 == 0
            )
            for i in range(40)
        )
    )
    row = await store.get_session(session.session_id)
    assert row is not None
    assert (row.input_tokens, row.output_tokens) == (120, 200)
    assert (row.cache_read_tokens, row.cache_write_tokens) == (280, 440)
    assert row.cost_usd > 0 and row.last_model_call_at == 1000.0
    assert row.context_tokens == 0  # a charge outside the conversation leaves its size alone
    assert metric(metrics, "input") == 120 and metric(metrics, "cache_write") == 440


async def test_flush_tokens_reach_the_session_and_metrics(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.queue_text("Hello!")
    fake_anthropic.queue_text("NO_REPLY")  # the flush before /new
    async with Harness(tmp_path, fake_anthropic.url) as h:
        assert h.app is not None
        await h.send("hi there")
        old = await h.app.store.current_session(KEY)
        assert old is not None
        await h.send("/new")
        row = await h.app.store.get_session(old.session_id)
        metrics = h.app.metrics
    requests = fake_anthropic.message_requests
    assert len(requests) == 2 and FLUSH_MARK in requests[1].last_user_text
    flush = requests[1].usage
    assert flush is not None and flush["cache_read_input_tokens"] > 0  # read the warm cache
    totals = {
        kind: sum((r.usage or {}).get(field, 0) for r in requests)
        for kind, field in [
            ("input", "input_tokens"),
            ("output", "output_tokens"),
            ("cache_read", "cache_read_input_tokens"),
            ("cache_write", "cache_creation_input_tokens"),
        ]
    }
    assert row is not None and row.memory_flush_count == 1
    assert row.input_tokens == totals["input"] and row.output_tokens == totals["output"]
    assert row.cache_read_tokens == totals["cache_read"]
    assert row.cache_write_tokens == totals["cache_write"]
    for kind, total in totals.items():
        assert metric(metrics, kind) == total


async def test_every_call_is_in_the_ledger_by_kind_and_sums_to_the_counters(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    from bot.store.costs import CostGroup
    from bot.tools.registry import Tool

    async def echo(args: dict[str, object], ctx: object) -> str:
        return "echoed"

    fake_anthropic.queue_tool_use("echo", {})
    fake_anthropic.queue_text("Done.")
    fake_anthropic.queue_text("NO_REPLY")  # the flush before /new
    async with Harness(tmp_path, fake_anthropic.url) as h:
        assert h.app is not None
        h.app.tools.register(Tool("echo", "echo", {"type": "object", "properties": {}}, echo))
        await h.send("use the tool")
        old = await h.app.store.current_session(KEY)
        assert old is not None
        await h.send("/new")
        row = await h.app.store.get_session(old.session_id)
        totals = await h.app.store.cost_totals(CostGroup.KIND)
        mine = await h.app.store.cost_totals(CostGroup.PERSON)
        exported = h.app.metrics.render().decode()
    assert {t.kind: t.calls for t in totals} == {"turn": 1, "tool_followup": 1, "flush": 1}
    assert row is not None and abs(sum(t.cost_usd for t in totals) - row.cost_usd) < 1e-9
    assert {t.key for t in mine} == {"local:alice"}  # the person who wrote pays, flush too
    for kind in ("turn", "tool_followup", "flush"):
        assert f'krill_cost_usd_total{{channel="local",kind="{kind}"}}' in exported


def test_every_internal_prompt_purpose_has_a_cost_kind() -> None:
    from bot.agent.job import COST_KIND_OF
    from bot.transcript import PromptPurpose

    assert set(COST_KIND_OF) == set(PromptPurpose)
