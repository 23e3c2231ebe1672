"""Tests for bot.agent.model: only failures of the API or the network under it become
model errors; a bug in Krill's own call path stays a bug (logged with its traceback, the
person told something went wrong on our side), never "the model could not be reached"."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from bot.agent.runner import INTERNAL_ERROR_REPLY
from bot.errors import ModelError
from tests.app_harness import Harness
from tests.fakes.anthropic import FakeAnthropic

KEY = "agent:main:local:direct:alice"


async def test_a_bug_in_a_stream_callback_is_not_a_model_error(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.queue_text("a reply that streams")

    async def broken(delta: str) -> None:
        raise KeyError("a bug in Krill")

    async with Harness(tmp_path, fake_anthropic.url) as h:
        assert h.app is not None
        with pytest.raises(KeyError):
            await h.app.model.complete(
                system=[{"type": "text", "text": "You are a test."}],
                messages=[{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
                on_text=broken,
            )


async def test_a_bug_mid_call_reaches_the_person_as_an_internal_error(
    tmp_path: Path, fake_anthropic: FakeAnthropic, caplog: pytest.LogCaptureFixture
) -> None:
    fake_anthropic.queue_text("a reply that streams")
    # A channel wired wrongly by a bug: the first streamed text starts typing, and comparing
    # its typing interval raises TypeError inside the model call.
    async with Harness(tmp_path, fake_anthropic.url, typing_interval=None) as h:
        assert h.app is not None
        with caplog.at_level(logging.ERROR):
            await h.send("hello")
        row = await h.app.store.current_session(KEY)
    assert h.channel.finals == [INTERNAL_ERROR_REPLY]
    assert len(fake_anthropic.message_requests) == 1  # a bug is not retried as a network fault
    failures = [r for r in caplog.records if r.name == "bot.agent.runner" and r.exc_info]
    assert failures, "the bug is logged with its traceback"
    assert not isinstance(failures[0].exc_info[1], ModelError)  # type: ignore[index]
    assert row is not None and row.errors == 1


async def test_a_request_never_asks_more_output_than_the_model_can_write(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    toml = (
        '[agent]\nmax_tokens = 50000\nmodels = ["claude-sonnet-4-6", "claude-opus-4-1"]\n'
        '[models."claude-sonnet-4-6"]\nmax_output_tokens = 16000\n'
    )
    system = [{"type": "text", "text": "You are a test."}]
    hi = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    async with Harness(tmp_path, fake_anthropic.url, toml) as h:
        assert h.app is not None
        await h.app.model.complete(system=system, messages=hi)  # type: ignore[arg-type]
        await h.app.model.complete(system=system, messages=hi, model="claude-opus-4-1")  # type: ignore[arg-type]
        await h.app.model.complete(system=system, messages=hi, model="unknown-model")  # type: ignore[arg-type]
    asked = [(r.body["model"], r.body["max_tokens"]) for r in fake_anthropic.message_requests]
    # Its [models] table, its known limit (Opus 4.1 writes 32k), or agent.max_tokens.
    assert asked == [
        ("claude-sonnet-4-6", 16000),
        ("claude-opus-4-1", 32000),
        ("unknown-model", 50000),
    ]
