"""bot.agent.model's retries and fallback, with the real SDKs against the fake Anthropic API
and the fake OpenAI-compatible server: what is retried, what is not waited out, what falls
back to the next model (and what does not: a refusal is an answer), and the cool-down that
makes the next call start there."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from bot.agent.model import ModelClient
from bot.config import Config, ProviderConfig
from bot.config.sections import AnthropicConfig
from bot.errors import ModelError, ModelOverloaded, ModelRateLimited, ModelUnavailable
from bot.metrics import Metrics
from bot.providers.failures import retry_delay
from bot.store.sqlite import SQLiteStore
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.openai import ChatReply, FakeOpenAI

SONNET, LOCAL = "claude-sonnet-4-6", "local:gpt-test"
HELLO: list[Any] = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


@pytest_asyncio.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    opened = SQLiteStore(tmp_path / "krill.db")
    await opened.open()
    yield opened
    await opened.close()


def client(
    anthropic_url: str,
    fake: FakeOpenAI | None,
    store: SQLiteStore,
    clock: Clock,
    *,
    retries: int = 2,
    fallback: bool = True,
) -> ModelClient:
    providers = {}
    if fake is not None:
        providers["local"] = ProviderConfig(kind="openai", base_url=fake.url, api_key="sk-test")
    config = Config(
        anthropic=AnthropicConfig(api_key="test", base_url=anthropic_url, max_retries=retries),
        providers=providers,
    )
    config.agent.fallback_models = [LOCAL] if fallback else []
    return ModelClient(config, state=store, metrics=Metrics(), clock=clock)


async def ask(model: ModelClient) -> str:
    try:
        return (await model.complete(system=[], messages=HELLO)).model
    finally:
        await model.close()


async def test_a_long_rate_limit_is_not_waited_out(
    fake_anthropic: FakeAnthropic, fake_openai: FakeOpenAI, store: SQLiteStore
) -> None:
    limit = {"retry-after": "120"}
    fake_anthropic.queue_error(429, "rate_limit_error", "slow down", headers=limit, times=2)
    assert await ask(client(fake_anthropic.url, fake_openai, store, Clock())) == LOCAL
    assert len(fake_anthropic.message_requests) == 1
    # Without a fallback model the person hears of it at once, not in two minutes.
    with pytest.raises(ModelRateLimited):
        await ask(client(fake_anthropic.url, None, store, Clock(), fallback=False))
    assert len(fake_anthropic.message_requests) == 2


async def test_a_server_error_is_retried_then_falls_back(
    fake_anthropic: FakeAnthropic, fake_openai: FakeOpenAI, store: SQLiteStore
) -> None:
    fake_anthropic.queue_error(500, "api_error", "boom", times=2)
    assert await ask(client(fake_anthropic.url, fake_openai, store, Clock(), retries=1)) == LOCAL
    assert len(fake_anthropic.message_requests) == 2 and len(fake_openai.chat_requests) == 1


async def test_an_overload_without_a_fallback_is_retried_like_before(
    fake_anthropic: FakeAnthropic, store: SQLiteStore
) -> None:
    fake_anthropic.queue_error(529, "overloaded_error", "Overloaded", times=2)
    with pytest.raises(ModelOverloaded):
        await ask(client(fake_anthropic.url, None, store, Clock(), retries=1, fallback=False))
    assert len(fake_anthropic.message_requests) == 2


async def test_an_unreachable_provider_falls_back_and_cools_down(
    fake_openai: FakeOpenAI, store: SQLiteStore
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}"
        clock = Clock()
        model = client(dead, fake_openai, store, clock, retries=0)
        assert await ask(model) == LOCAL
    assert await model.serving(SONNET) == LOCAL
    assert await model.cooling(SONNET) == "unavailable"
    clock.now += model.config.agent.fallback_cooldown_seconds + 1
    assert await model.serving(SONNET) == SONNET


async def test_when_every_model_fails_the_last_error_reaches_the_caller(
    fake_anthropic: FakeAnthropic, fake_openai: FakeOpenAI, store: SQLiteStore
) -> None:
    fake_anthropic.queue_error(529, "overloaded_error", "Overloaded")
    fake_openai.queue_error(503, "upstream down", times=3)  # its own two retries too
    with pytest.raises(ModelUnavailable) as failed:
        await ask(client(fake_anthropic.url, fake_openai, store, Clock(), retries=0))
    assert failed.value.model == LOCAL


async def test_a_refusal_is_an_answer_not_a_failure(
    fake_anthropic: FakeAnthropic, fake_openai: FakeOpenAI, store: SQLiteStore
) -> None:
    fake_anthropic.queue_text("I can't help with that.", stop_reason="refusal")
    model = client(fake_anthropic.url, fake_openai, store, Clock())
    try:
        refused = await model.complete(system=[], messages=HELLO)
        # The OpenAI-compatible side's content filter reads as the same stop reason.
        fake_openai.queue(ChatReply("", finish_reason="content_filter"))
        filtered = await model.complete(system=[], messages=HELLO, model=LOCAL)
    finally:
        await model.close()
    assert (refused.model, refused.stop_reason) == (SONNET, "refusal")
    assert (filtered.model, filtered.stop_reason) == (LOCAL, "refusal")
    assert len(fake_openai.chat_requests) == 1  # the refusal did not move to the fallback
    assert await model.cooling(SONNET) is None


@pytest.mark.parametrize(
    ("error", "retries_done", "fallback_left", "wait"),
    [
        (ModelOverloaded("x"), 0, True, None),  # another model answers now
        (ModelOverloaded("x"), 0, False, "backoff"),
        (ModelUnavailable("x"), 2, True, None),  # retries used up
        (ModelError("model rejected the request: 400"), 0, True, None),
    ],
)
def test_retry_delays(
    error: ModelError, retries_done: int, fallback_left: bool, wait: str | None
) -> None:
    got = retry_delay(
        error,
        retries_done=retries_done,
        max_retries=2,
        longest_wait=20,
        fallback_left=fallback_left,
        jitter=0.0,
    )
    assert (got is None) == (wait is None)
    assert got is None or got == 0.5


def test_a_named_wait_is_used_when_short_and_refused_when_long() -> None:
    short, long = ModelRateLimited("x"), ModelRateLimited("x")
    short.retry_after, long.retry_after = 3.0, 21.0
    args: dict[str, Any] = dict(retries_done=0, max_retries=2, longest_wait=20, jitter=0.5)
    assert retry_delay(short, fallback_left=True, **args) == 3.0
    assert retry_delay(long, fallback_left=True, **args) is None
    refused = ModelUnavailable("x")
    refused.should_retry = False  # the server's x-should-retry: false
    assert retry_delay(refused, fallback_left=False, **args) is None
