"""The fake OpenAI-compatible server behaves as the real one does for the real `openai` SDK:
streamed chunks with tool_calls deltas, usage only when asked for (in a last chunk without
choices), cached prompt tokens for a repeated prefix, and errors in OpenAI's shapes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest
import pytest_asyncio

from tests.fakes.openai import ChatError, ChatReply, FakeOpenAI, ModelSpec

HI: list[Any] = [{"role": "user", "content": "hi"}]


@pytest_asyncio.fixture
async def sdk(fake_openai: FakeOpenAI) -> AsyncIterator[openai.AsyncOpenAI]:
    client = openai.AsyncOpenAI(api_key="sk-test", base_url=fake_openai.url, max_retries=0)
    yield client
    await client.close()


async def test_a_stream_carries_tool_call_deltas_and_usage_last(
    fake_openai: FakeOpenAI, sdk: openai.AsyncOpenAI
) -> None:
    fake_openai.queue(ChatReply.calling("reminder_create", {"when": "in 5 minutes"}, text="Ok."))
    chunks = [
        c
        async for c in await sdk.chat.completions.create(
            model="gpt-test", messages=HI, stream=True, stream_options={"include_usage": True}
        )
    ]
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    calls = [t for d in deltas for t in d.tool_calls or []]
    assert calls[0].id and calls[0].function and calls[0].function.name == "reminder_create"
    assert all(t.id is None for t in calls[1:])  # later pieces carry only arguments
    arguments = "".join(t.function.arguments or "" for t in calls if t.function)
    assert arguments == '{"when":"in 5 minutes"}'
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert all(c.usage is None for c in chunks[:-1])
    plain = [
        c
        async for c in await sdk.chat.completions.create(model="gpt-test", messages=HI, stream=True)
    ]
    assert all(c.usage is None for c in plain)


async def test_a_repeated_long_prefix_is_read_from_the_cache(
    fake_openai: FakeOpenAI, sdk: openai.AsyncOpenAI
) -> None:
    long: list[Any] = [{"role": "system", "content": "rules " * 1500}, *HI]
    first = await sdk.chat.completions.create(model="gpt-test", messages=long)
    second = await sdk.chat.completions.create(model="gpt-test", messages=[*long, *HI])
    short = await sdk.chat.completions.create(model="gpt-test", messages=HI)
    assert first.usage and first.usage.prompt_tokens_details
    assert first.usage.prompt_tokens_details.cached_tokens == 0
    assert second.usage and second.usage.prompt_tokens_details
    cached = second.usage.prompt_tokens_details.cached_tokens or 0
    assert cached >= 1024 and cached % 128 == 0 and cached <= first.usage.prompt_tokens
    assert short.usage and short.usage.prompt_tokens_details
    assert short.usage.prompt_tokens_details.cached_tokens == 0  # under 1,024 tokens


async def test_errors_come_in_openai_shapes(
    fake_openai: FakeOpenAI, sdk: openai.AsyncOpenAI
) -> None:
    fake_openai.models["tiny"] = ModelSpec(context_window=50)
    fake_openai.queue(
        ChatError(429, "Rate limit reached", "requests", headers={"retry-after": "7"})
    )
    with pytest.raises(openai.RateLimitError) as limited:
        await sdk.chat.completions.create(model="gpt-test", messages=HI)
    assert limited.value.response.headers["retry-after"] == "7"
    with pytest.raises(openai.BadRequestError) as unknown:
        await sdk.chat.completions.create(model="nope", messages=HI)
    assert unknown.value.code == "model_not_found"
    long: list[Any] = [{"role": "user", "content": "word " * 400}]
    with pytest.raises(openai.BadRequestError) as too_long:
        await sdk.chat.completions.create(model="tiny", messages=long)
    assert too_long.value.code == "context_length_exceeded"
    assert "maximum context length is 50 tokens" in too_long.value.message
    orphan: list[Any] = [*HI, {"role": "tool", "tool_call_id": "call_1", "content": "x"}]
    with pytest.raises(openai.BadRequestError, match="role 'tool' must be a response"):
        await sdk.chat.completions.create(model="gpt-test", messages=orphan)
    wrong = openai.AsyncOpenAI(api_key="sk-nope", base_url=fake_openai.url, max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        await wrong.chat.completions.create(model="gpt-test", messages=HI)
    await wrong.close()
    listed = [m.id async for m in sdk.models.list()]
    assert listed == ["gpt-test", "tiny"]
