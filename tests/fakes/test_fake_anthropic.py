"""Checks that the fake Anthropic API behaves like the real one as seen by the real SDK client."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import anthropic
import httpx2
import pytest

from tests.fakes.anthropic import (
    CacheControlError,
    CacheSimulator,
    FakeAnthropic,
    Reply,
    server_search_blocks,
)

MODEL = "claude-sonnet-4-6"


@pytest.fixture
async def client(fake_anthropic: FakeAnthropic) -> AsyncIterator[anthropic.AsyncAnthropic]:
    c = anthropic.AsyncAnthropic(api_key="test", base_url=fake_anthropic.url, max_retries=0)
    yield c
    await c.close()


def _user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


# --------------------------------------------------------------------------- replies


async def test_stream_text_and_final_message(
    fake_anthropic: FakeAnthropic, client: anthropic.AsyncAnthropic
) -> None:
    text = "The quick brown fox jumps over the lazy dog, twice over."
    fake_anthropic.queue_text(text)
    chunks: list[str] = []
    async with client.messages.stream(
        model=MODEL, max_tokens=256, system="be brief", messages=_user("hello there")
    ) as stream:
        async for chunk in stream.text_stream:
            chunks.append(chunk)
        final = await stream.get_final_message()
    assert len(chunks) > 1
    assert "".join(chunks) == text
    assert final.content[0].type == "text" and final.content[0].text == text
    assert final.stop_reason == "end_turn"
    assert final.model == MODEL
    assert final.usage.output_tokens == len(text) // 4
    assert final.usage.input_tokens > 0
    rec = fake_anthropic.message_requests[-1]
    assert rec.stream and rec.path == "/v1/messages"
    assert rec.headers["authorization"] == "Bearer test"
    assert fake_anthropic.last_user_text() == "hello there"
    assert fake_anthropic.system_text() == "be brief"


async def test_default_reply_echoes_and_is_replaceable(
    fake_anthropic: FakeAnthropic, client: anthropic.AsyncAnthropic
) -> None:
    msg = await client.messages.create(
        model=MODEL,
        max_tokens=64,
        messages=[{"role": "user", "content": [{"type": "text", "text": "ping"}]}],
    )
    assert msg.content[0].text == "echo: ping"
    fake_anthropic.default_handler = lambda body: f"{len(body['messages'])} messages"
    msg = await client.messages.create(model=MODEL, max_tokens=64, messages=_user("x"))
    assert msg.content[0].text == "1 messages"


async def test_tool_use_streamed_and_parsed(
    fake_anthropic: FakeAnthropic, client: anthropic.AsyncAnthropic
) -> None:
    args = {"query": "weather in Oslo", "days": 3, "units": ["c", "mm"]}
    tool_id = fake_anthropic.queue_tool_use("search", args, text="Let me look.")
    async with client.messages.stream(
        model=MODEL,
        max_tokens=256,
        messages=_user("weather?"),
        tools=[{"name": "search", "description": "d", "input_schema": {"type": "object"}}],
    ) as stream:
        final = await stream.get_final_message()
    assert final.stop_reason == "tool_use"
    assert [b.type for b in final.content] == ["text", "tool_use"]
    block = final.content[1]
    assert block.type == "tool_use"
    assert block.id == tool_id and block.name == "search" and block.input == args
    assert fake_anthropic.message_requests[-1].tool_names == ["search"]


async def test_non_streaming_create_and_handler(
    fake_anthropic: FakeAnthropic, client: anthropic.AsyncAnthropic
) -> None:
    fake_anthropic.queue_handler(lambda body: Reply.text(body["messages"][-1]["content"].upper()))
    msg = await client.messages.create(model=MODEL, max_tokens=64, messages=_user("shout"))
    assert msg.content[0].text == "SHOUT"
    assert msg.id.startswith("msg_")
    assert not fake_anthropic.message_requests[-1].stream
    assert fake_anthropic.pending == 0


async def test_tool_result_round_trip_and_validation(
    fake_anthropic: FakeAnthropic, client: anthropic.AsyncAnthropic
) -> None:
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "t", "input": {}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "42"}],
        },
    ]
    msg = await client.messages.create(model=MODEL, max_tokens=64, messages=history)
    assert msg.content[0].text == "echo: 42"
    with pytest.raises(anthropic.BadRequestError, match="without `tool_result`"):
        await client.messages.create(model=MODEL, max_tokens=64, messages=history[:2])


async def test_max_tokens_truncates(
    fake_anthropic: FakeAnthropic, client: anthropic.AsyncAnthropic
) -> None:
    fake_anthropic.queue_text("x" * 400)
    msg = await client.messages.create(model=MODEL, max_tokens=10, messages=_user("long"))
    assert msg.stop_reason == "max_tokens"
    assert msg.content[0].text == "x" * 40


async def test_count_tokens(
    fake_anthropic: FakeAnthropic, client: anthropic.AsyncAnthropic
) -> None:
    body = {"model": MODEL, "messages": _user("a" * 400), "system": "s" * 100}
    result = await client.messages.count_tokens(**body)
    assert result.input_tokens == fake_anthropic.cache.count_tokens(body)
    assert fake_anthropic.requests[-1].path == "/v1/messages/count_tokens"
    assert fake_anthropic.pending == 0


# --------------------------------------------------------------------------- errors


async def test_rate_limit_error(
    fake_anthropic: FakeAnthropic, client: anthropic.AsyncAnthropic
) -> None:
    fake_anthropic.queue_error(
        429, "rate_limit_error", "Number of requests exceeded", headers={"retry-after": "7"}
    )
    with pytest.raises(anthropic.RateLimitError) as info:
        await client.messages.create(model=MODEL, max_tokens=64, messages=_user("x"))
    assert info.value.response.headers["retry-after"] == "7"
    assert info.value.body["error"]["type"] == "rate_limit_error"  # type: ignore[index]
    assert info.value.body["request_id"].startswith("req_")  # type: ignore[index]


async def test_overloaded_error(
    fake_anthropic: FakeAnthropic, client: anthropic.AsyncAnthropic
) -> None:
    fake_anthropic.queue_error(529, "overloaded_error", "Overloaded")
    with pytest.raises(anthropic.InternalServerError) as info:
        async with client.messages.stream(
            model=MODEL, max_tokens=64, messages=_user("x")
        ) as stream:
            await stream.get_final_message()
    assert info.value.status_code == 529
    assert isinstance(info.value, anthropic.OverloadedError)


async def test_server_error(
    fake_anthropic: FakeAnthropic, client: anthropic.AsyncAnthropic
) -> None:
    fake_anthropic.queue_error(500, "api_error", "Internal server error")
    with pytest.raises(anthropic.InternalServerError):
        await client.messages.create(model=MODEL, max_tokens=64, messages=_user("x"))


async def test_prompt_too_long(
    fake_anthropic: FakeAnthropic, client: anthropic.AsyncAnthropic
) -> None:
    fake_anthropic.queue_error(
        400, "invalid_request_error", "prompt is too long: 208656 tokens > 200000 maximum"
    )
    with pytest.raises(anthropic.BadRequestError, match=r"prompt is too long: 208656 tokens"):
        await client.messages.create(model=MODEL, max_tokens=64, messages=_user("x"))


async def test_context_window_enforced(
    fake_anthropic: FakeAnthropic, client: anthropic.AsyncAnthropic
) -> None:
    fake_anthropic.context_window = 100
    with pytest.raises(anthropic.BadRequestError, match=r"tokens > 100 maximum"):
        await client.messages.create(model=MODEL, max_tokens=64, messages=_user("y" * 1000))


async def test_retries_honour_queue_and_should_retry_header(fake_anthropic: FakeAnthropic) -> None:
    c = anthropic.AsyncAnthropic(api_key="k", base_url=fake_anthropic.url, max_retries=2)
    try:
        fake_anthropic.queue_error(
            529, "overloaded_error", "Overloaded", headers={"retry-after-ms": "1"}
        )
        fake_anthropic.queue_text("after retry")
        msg = await c.messages.create(model=MODEL, max_tokens=64, messages=_user("x"))
        assert msg.content[0].text == "after retry"
        assert len(fake_anthropic.message_requests) == 2
        assert fake_anthropic.message_requests[1].headers["x-stainless-retry-count"] == "1"

        fake_anthropic.queue_error(500, "api_error", "boom", should_retry=False, times=3)
        with pytest.raises(anthropic.InternalServerError):
            await c.messages.create(model=MODEL, max_tokens=64, messages=_user("x"))
        assert len(fake_anthropic.message_requests) == 3
    finally:
        await c.close()


async def test_auth_and_not_found(fake_anthropic: FakeAnthropic) -> None:
    async with httpx2.AsyncClient(base_url=fake_anthropic.url) as http:
        r = await http.post("/v1/messages", json={"model": MODEL})
        assert r.status_code == 401
        assert r.json()["error"]["type"] == "authentication_error"
        r = await http.post(
            "/v1/messages",
            headers={"x-api-key": "k"},
            json={"model": MODEL, "max_tokens": 5, "messages": _user("x")},
        )
        assert r.status_code == 200 and r.json()["content"][0]["text"] == "echo: x"
        r = await http.get("/v1/nope", headers={"x-api-key": "k"})
        assert r.status_code == 404
        assert r.json()["type"] == "error"
        assert r.json()["error"]["type"] == "not_found_error"


async def test_dropped_stream_raises(
    fake_anthropic: FakeAnthropic, client: anthropic.AsyncAnthropic
) -> None:
    fake_anthropic.queue_drop(30)
    received: list[str] = []
    # The SDK does not wrap errors raised while reading the body: httpx2's error surfaces as is.
    with pytest.raises(httpx2.RemoteProtocolError):
        async with client.messages.stream(
            model=MODEL, max_tokens=1000, messages=_user("x")
        ) as stream:
            async for chunk in stream.text_stream:
                received.append(chunk)
    assert 0 < len("".join(received)) <= 30


async def test_a_cleanly_closed_stream_ends_without_message_stop(
    fake_anthropic: FakeAnthropic, client: anthropic.AsyncAnthropic
) -> None:
    fake_anthropic.queue_clean_close(30, text="a long answer " * 10)
    async with client.messages.stream(model=MODEL, max_tokens=1000, messages=_user("x")) as stream:
        kinds = [event.type async for event in stream]
        final = await stream.get_final_message()
    # The SDK raises nothing: the part that arrived looks like a whole reply.
    assert "message_stop" not in kinds
    assert final.stop_reason is None
    assert 0 < len(final.content[0].text) <= 30  # type: ignore[union-attr]


async def test_dropped_non_streaming_raises(
    fake_anthropic: FakeAnthropic, client: anthropic.AsyncAnthropic
) -> None:
    fake_anthropic.queue_drop(0)
    with pytest.raises(anthropic.APIConnectionError):
        await client.messages.create(model=MODEL, max_tokens=64, messages=_user("x"))


async def test_stream_error_event(
    fake_anthropic: FakeAnthropic, client: anthropic.AsyncAnthropic
) -> None:
    fake_anthropic.queue_stream_error("overloaded_error", "Overloaded", after_chars=10)
    with pytest.raises(anthropic.APIStatusError, match="overloaded_error"):
        async with client.messages.stream(
            model=MODEL, max_tokens=1000, messages=_user("x")
        ) as stream:
            await stream.get_final_message()


async def test_hold_and_concurrency(
    fake_anthropic: FakeAnthropic, client: anthropic.AsyncAnthropic
) -> None:
    fake_anthropic.hold()
    tasks = [
        asyncio.create_task(
            client.messages.create(model=MODEL, max_tokens=64, messages=_user(str(i)))
        )
        for i in range(3)
    ]
    await fake_anthropic.wait_for_requests(3)
    assert fake_anthropic.in_flight == 3
    fake_anthropic.release()
    replies = sorted(m.content[0].text for m in await asyncio.gather(*tasks))
    assert replies == ["echo: 0", "echo: 1", "echo: 2"]
    assert fake_anthropic.max_in_flight == 3


# --------------------------------------------------------------------------- cache


def _cached_body(system: str, user: str = "question", **extra: Any) -> dict[str, Any]:
    return {
        "model": MODEL,
        "max_tokens": 64,
        "system": [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}],
        "messages": _user(user),
        **extra,
    }


async def test_second_request_reads_cache_over_the_wire(
    fake_anthropic: FakeAnthropic, client: anthropic.AsyncAnthropic
) -> None:
    body = _cached_body("rules " * 1000)
    first = await client.messages.create(**body)
    assert first.usage.cache_read_input_tokens == 0
    assert first.usage.cache_creation_input_tokens > 1024
    assert first.usage.cache_creation is not None
    assert (
        first.usage.cache_creation.ephemeral_5m_input_tokens
        == first.usage.cache_creation_input_tokens
    )
    async with client.messages.stream(**body) as stream:
        second = await stream.get_final_message()
    assert second.usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens
    assert second.usage.cache_creation_input_tokens == 0
    assert second.usage.input_tokens == first.usage.input_tokens


def test_changed_system_prompt_misses() -> None:
    sim = CacheSimulator()
    sim.process(_cached_body("rules " * 1000))
    usage = sim.process(_cached_body("Rules " * 1000))
    assert usage.cache_read_input_tokens == 0
    assert usage.cache_creation_input_tokens > 0


def test_expiry_after_ttl_with_fake_clock() -> None:
    now = [0.0]
    sim = CacheSimulator(clock=lambda: now[0])
    body = _cached_body("rules " * 1000)
    sim.process(body)
    now[0] = 299.0
    assert sim.process(body).cache_read_input_tokens > 0  # the hit refreshes the TTL
    now[0] = 299.0 + 299.0
    assert sim.process(body).cache_read_input_tokens > 0
    now[0] += 301.0
    usage = sim.process(body)
    assert usage.cache_read_input_tokens == 0 and usage.cache_creation_input_tokens > 0


def test_one_hour_ttl_split() -> None:
    now = [0.0]
    sim = CacheSimulator(clock=lambda: now[0])
    body = _cached_body("rules " * 1000)
    body["system"][0]["cache_control"]["ttl"] = "1h"
    first = sim.process(body)
    assert first.ephemeral_1h_input_tokens == first.cache_creation_input_tokens > 0
    assert first.ephemeral_5m_input_tokens == 0
    now[0] = 3000.0
    assert sim.process(body).cache_read_input_tokens > 0


def test_below_minimum_caches_nothing() -> None:
    sim = CacheSimulator()
    body = _cached_body("short system prompt")
    for _ in range(2):
        usage = sim.process(body)
        assert usage.cache_creation_input_tokens == 0
        assert usage.cache_read_input_tokens == 0
        assert usage.input_tokens == sim.count_tokens(body)
    assert len(sim) == 0


async def test_too_many_breakpoints_rejected(
    fake_anthropic: FakeAnthropic, client: anthropic.AsyncAnthropic
) -> None:
    marker = {"type": "ephemeral"}
    system = [{"type": "text", "text": f"part {i}", "cache_control": marker} for i in range(5)]
    with pytest.raises(CacheControlError):
        CacheSimulator().process({"model": MODEL, "system": system, "messages": _user("x")})
    with pytest.raises(anthropic.BadRequestError, match="maximum of 4 blocks"):
        await client.messages.create(
            model=MODEL,
            max_tokens=64,
            system=system,
            messages=_user("x"),  # type: ignore[arg-type]
        )


def test_growing_conversation_hits_via_lookback_and_automatic_breakpoint() -> None:
    sim = CacheSimulator(min_tokens=100)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "context " * 100}]
    body = {"model": MODEL, "messages": messages, "cache_control": {"type": "ephemeral"}}
    first = sim.process(body)
    assert first.cache_creation_input_tokens == first.total_input_tokens
    messages += [
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "next question"},
    ]
    second = sim.process(body)
    assert second.cache_read_input_tokens == first.cache_creation_input_tokens
    assert second.cache_creation_input_tokens == second.total_input_tokens - (
        second.cache_read_input_tokens
    )
    assert second.input_tokens == 0


def test_lookback_limit_of_twenty_blocks() -> None:
    sim = CacheSimulator(min_tokens=10)
    blocks = [{"type": "text", "text": f"block number {i:03d} " * 4} for i in range(30)]
    short = [*blocks[:5]]
    short[-1] = {**short[-1], "cache_control": {"type": "ephemeral"}}
    sim.process({"model": MODEL, "messages": [{"role": "user", "content": short}]})
    near = [*blocks[:24]]
    near[-1] = {**near[-1], "cache_control": {"type": "ephemeral"}}
    assert (
        sim.process(
            {"model": MODEL, "messages": [{"role": "user", "content": near}]}
        ).cache_read_input_tokens
        > 0
    )
    sim.clear()
    sim.process({"model": MODEL, "messages": [{"role": "user", "content": short}]})
    far = [*blocks[:26]]
    far[-1] = {**far[-1], "cache_control": {"type": "ephemeral"}}
    usage = sim.process({"model": MODEL, "messages": [{"role": "user", "content": far}]})
    assert usage.cache_read_input_tokens == 0


def test_tools_are_part_of_the_prefix() -> None:
    sim = CacheSimulator()
    tool = {"name": "t", "description": "d" * 5000, "input_schema": {"type": "object"}}
    body = {
        "model": MODEL,
        "tools": [{**tool, "cache_control": {"type": "ephemeral"}}],
        "messages": _user("x"),
    }
    assert sim.process(body).cache_creation_input_tokens > 0
    assert sim.process(body).cache_read_input_tokens > 0
    body["tools"] = [{**tool, "description": "changed", "cache_control": {"type": "ephemeral"}}]
    assert sim.process(body).cache_read_input_tokens == 0


async def test_client_fixture_and_handler_errors(
    fake_anthropic: FakeAnthropic, fake_anthropic_client: anthropic.AsyncAnthropic
) -> None:
    def broken(body: dict[str, Any]) -> str:
        raise RuntimeError("oops")

    fake_anthropic.queue_handler(broken)
    with pytest.raises(anthropic.InternalServerError, match="oops"):
        await fake_anthropic_client.messages.create(model=MODEL, max_tokens=64, messages=_user("x"))
    assert isinstance(fake_anthropic.handler_errors[0], RuntimeError)
    with pytest.raises(anthropic.BadRequestError, match="non-whitespace"):
        await fake_anthropic_client.messages.create(
            model=MODEL, max_tokens=64, messages=_user("   ")
        )
    assert fake_anthropic.pending == 0


async def test_stream_error_on_non_streaming_request_is_http_error(
    fake_anthropic: FakeAnthropic, client: anthropic.AsyncAnthropic
) -> None:
    fake_anthropic.queue_stream_error("overloaded_error", "Overloaded")
    with pytest.raises(anthropic.OverloadedError):
        await client.messages.create(model=MODEL, max_tokens=64, messages=_user("x"))


# --------------------------------------------------------------------------- web search

SEARCH_TOOL = {"type": "web_search_20250305", "name": "web_search", "max_uses": 1}
PAGES = [("https://docs.python.org/3/", "Python docs"), ("https://evil.example/", "Evil")]


async def test_server_side_search_streams_as_the_sdk_expects(
    fake_anthropic: FakeAnthropic, client: anthropic.AsyncAnthropic
) -> None:
    fake_anthropic.queue(Reply.web_search("python", PAGES, "Python is a language.", cite=(0,)))
    async with client.messages.stream(
        model=MODEL, max_tokens=256, messages=_user("what is python?"), tools=[SEARCH_TOOL]
    ) as stream:
        text = "".join([chunk async for chunk in stream.text_stream])
        final = await stream.get_final_message()
    assert text == "Python is a language."
    call, result, answer = final.content
    assert call.type == "server_tool_use" and call.name == "web_search"
    assert call.input == {"query": "python"}
    assert result.type == "web_search_tool_result" and result.tool_use_id == call.id
    assert isinstance(result.content, list)
    assert [r.url for r in result.content] == [u for u, _ in PAGES]
    assert answer.type == "text" and answer.citations is not None
    (citation,) = answer.citations
    assert citation.type == "web_search_result_location"
    assert (citation.url, citation.title) == PAGES[0]
    assert final.usage.server_tool_use is not None
    assert final.usage.server_tool_use.web_search_requests == 1


async def test_search_settings_are_applied_to_the_scripted_results(
    fake_anthropic: FakeAnthropic, client: anthropic.AsyncAnthropic
) -> None:
    twice = Reply(
        content=[
            *server_search_blocks("one", PAGES),
            *server_search_blocks("two", PAGES),
            {"type": "text", "text": "done"},
        ]
    )
    fake_anthropic.queue(twice)
    blocked = {**SEARCH_TOOL, "blocked_domains": ["evil.example"]}
    final = await client.messages.create(
        model=MODEL, max_tokens=256, messages=_user("search twice"), tools=[blocked]
    )
    first, second = final.content[1], final.content[3]
    assert [r.url for r in first.content] == ["https://docs.python.org/3/"]  # type: ignore[union-attr]
    assert second.content.error_code == "max_uses_exceeded"  # type: ignore[union-attr]
    assert final.usage.server_tool_use is not None
    assert final.usage.server_tool_use.web_search_requests == 1


async def test_search_requests_are_validated(
    fake_anthropic: FakeAnthropic, client: anthropic.AsyncAnthropic
) -> None:
    both = {**SEARCH_TOOL, "allowed_domains": ["a.org"], "blocked_domains": ["b.org"]}
    with pytest.raises(anthropic.BadRequestError, match="both allowed_domains and blocked"):
        await client.messages.create(model=MODEL, max_tokens=64, messages=_user("hi"), tools=[both])
    with pytest.raises(anthropic.BadRequestError, match="both allowed_domains and blocked"):
        await client.messages.count_tokens(model=MODEL, messages=_user("hi"), tools=[both])
    call = server_search_blocks("q", PAGES)[0]
    unanswered = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [call, {"type": "text", "text": "so"}]},
        {"role": "user", "content": "and?"},
    ]
    with pytest.raises(anthropic.BadRequestError, match="web_search_tool_result"):
        await client.messages.create(model=MODEL, max_tokens=64, messages=unanswered)
    # A reply that searches when the request offers no search tool is a broken script.
    fake_anthropic.queue(Reply.web_search("q", PAGES, "answer"))
    with pytest.raises(anthropic.InternalServerError):
        await client.messages.create(model=MODEL, max_tokens=64, messages=_user("hi"))
    assert fake_anthropic.handler_errors
    fake_anthropic.handler_errors.clear()
