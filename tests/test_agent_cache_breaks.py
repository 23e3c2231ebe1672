"""Prompt-cache breaks: the pure detection, and end to end a system prompt edited while the
cache is warm, logged and counted in /metrics."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from bot.agent.cache_breaks import UNKNOWN_BLOCK, fingerprint, first_difference, is_break
from bot.types import Usage
from tests.app_harness import Harness
from tests.fakes.anthropic import FakeAnthropic

SYSTEM = [{"type": "text", "text": "You are Krill."}]
TOOLS = [{"name": "look", "description": "d", "input_schema": {"type": "object"}}]


def msg(role: str, text: str) -> dict:
    return {"role": role, "content": [{"type": "text", "text": text}]}


HISTORY = [msg("user", "hello " * 50), msg("assistant", "hi"), msg("user", "more")]
CACHED = Usage(input_tokens=5, cache_read_tokens=1000, cache_write_tokens=500)


def printed(messages=HISTORY, system=SYSTEM, tools=TOOLS, usage=CACHED, at=0.0):
    return fingerprint(system=system, tools=tools, messages=messages, usage=usage, at=at)


def test_the_first_differing_block_is_named_in_cache_order() -> None:
    before = printed()
    assert first_difference(before, printed(tools=[])) == "tools"
    assert first_difference(before, printed(system=[{"type": "text", "text": "x"}])) == "system"
    edited = [HISTORY[0], msg("assistant", "hi!"), HISTORY[2]]
    assert first_difference(before, printed(messages=edited)) == "message 1"
    assert first_difference(before, printed(messages=HISTORY[:1])) == "message 1"
    longer = [*HISTORY, msg("assistant", "ok"), msg("user", "next")]
    assert first_difference(before, printed(messages=longer)) == UNKNOWN_BLOCK


def test_a_break_is_a_short_read_while_the_cache_should_be_warm() -> None:
    before = printed(at=100.0)  # left 1,500 tokens in the cache
    assert not is_break(before, Usage(cache_read_tokens=1500), now=200, ttl_seconds=300)
    assert not is_break(before, Usage(cache_read_tokens=1430), now=200, ttl_seconds=300)
    assert is_break(before, Usage(cache_read_tokens=1400), now=200, ttl_seconds=300)
    assert not is_break(before, Usage(cache_read_tokens=0), now=400, ttl_seconds=300)  # expired


def breaks(h: Harness) -> dict[str, float]:
    found = {}
    for line in h.app.metrics.render().decode().splitlines():
        if line.startswith("krill_cache_breaks_total{"):
            block = line.split('block="', 1)[1].split('"', 1)[0]
            found[block] = float(line.split()[-1])
    return found


async def test_an_edited_system_prompt_is_reported_as_a_cache_break(
    tmp_path: Path, fake_anthropic: FakeAnthropic, caplog: pytest.LogCaptureFixture
) -> None:
    fake_anthropic.default_handler = lambda body: "ok"
    async with Harness(tmp_path, fake_anthropic.url, "") as h:
        await h.send("first question " + "context " * 800)
        await h.send("second question")
        assert breaks(h) == {}  # the second turn read what the first cached
        agents = h.workspace / "AGENTS.md"
        agents.write_text(agents.read_text() + "\n- Always answer in French.\n")
        with caplog.at_level(logging.WARNING, logger="bot.agent.cache_breaks"):
            await h.send("third question")
        assert breaks(h) == {"system": 1.0}
    assert "prompt cache break in agent:main:local:direct:" in caplog.text
    assert "first difference: system" in caplog.text
