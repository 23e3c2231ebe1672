"""bot.providers.openai and openai_request: an Anthropic-shaped request as Chat Completions
(system, tools as functions, tool calls and results in the order the API demands, images as
data URLs or a note, PDFs as their text or a note), and the reply put back together from
real streamed chunks of the fake server through the real `openai` SDK."""

from __future__ import annotations

import base64
import io
import json
from typing import Any

import pytest
from PIL import Image

from bot.agent.model import ModelClient
from bot.checks import FAIL, WARN
from bot.config import Config, ProviderConfig
from bot.config.models import ModelConfig
from bot.config.sections import AgentConfig
from bot.errors import ContextOverflow, ModelAuthError, ModelError, ModelRateLimited
from bot.providers.checks import check_providers
from bot.providers.openai import overflow
from bot.providers.openai_request import ChatTranslator, chat_tools, pdf_text
from tests.fakes.openai import ChatError, ChatReply, FakeOpenAI, ModelSpec

MODEL = "local:gpt-test"


def png() -> str:
    out = io.BytesIO()
    Image.new("RGB", (40, 30), (0, 90, 200)).save(out, "PNG")
    return base64.b64encode(out.getvalue()).decode()


def tiny_pdf(text: str | None) -> bytes:
    """A one-page PDF, with `text` on it or (None) no text layer at all."""
    from pypdf import PdfWriter
    from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

    writer = PdfWriter()
    page = writer.add_blank_page(200, 200)
    if text is not None:
        font = DictionaryObject(
            {
                NameObject("/Type"): NameObject("/Font"),
                NameObject("/Subtype"): NameObject("/Type1"),
                NameObject("/BaseFont"): NameObject("/Helvetica"),
            }
        )
        page[NameObject("/Resources")] = DictionaryObject(
            {NameObject("/Font"): DictionaryObject({NameObject("/F1"): writer._add_object(font)})}
        )
        stream = DecodedStreamObject()
        stream.set_data(f"BT /F1 12 Tf 20 100 Td ({text}) Tj ET".encode())
        page[NameObject("/Contents")] = writer._add_object(stream)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def translator(images: bool = True) -> ChatTranslator:
    return ChatTranslator(model=MODEL, images=images, read_pdf=lambda d: pdf_text(d, 1000))


def test_a_tool_exchange_becomes_tool_calls_then_tool_messages_before_the_text() -> None:
    messages: list[Any] = [
        {"role": "user", "content": [{"type": "text", "text": "save it"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Saving."},
                {"type": "tool_use", "id": "toolu_1", "name": "memory_append", "input": {"a": 1}},
                {"type": "server_tool_use", "id": "srv_1", "name": "web_search", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "and this", "cache_control": {"type": "ephemeral"}},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": "no",
                    "is_error": True,
                },
            ],
        },
    ]
    system: list[Any] = [
        {"type": "text", "text": "You are Krill."},
        {"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}},
    ]
    out = translator().messages(system, messages)
    assert out == [
        {"role": "system", "content": "You are Krill.\n\nBe brief."},
        {"role": "user", "content": "save it"},
        {
            "role": "assistant",
            "content": "Saving.",
            "tool_calls": [
                {
                    "id": "toolu_1",
                    "type": "function",
                    "function": {"name": "memory_append", "arguments": '{"a": 1}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "toolu_1", "content": "Error: no"},
        {"role": "user", "content": "and this"},
    ]


def test_tools_become_functions_and_server_tools_are_left_out() -> None:
    tools: list[Any] = [
        {"name": "memory_append", "description": "Append", "input_schema": {"type": "object"}},
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 3},
    ]
    assert chat_tools(tools) == [
        {
            "type": "function",
            "function": {
                "name": "memory_append",
                "parameters": {"type": "object"},
                "description": "Append",
            },
        }
    ]


def test_images_are_data_urls_or_a_note_for_a_model_without_vision() -> None:
    data = png()
    block = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}
    turn: list[Any] = [{"role": "user", "content": [{"type": "text", "text": "see"}, block]}]
    seen = translator().messages([], turn)[0]["content"]
    assert seen[1] == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"}}
    blind = translator(images=False).messages([], turn)[0]["content"]
    assert isinstance(blind, str) and f"{MODEL} cannot see images" in blind


def test_a_pdf_becomes_its_text_in_an_untrusted_block_or_a_note_when_it_has_none() -> None:
    def document(raw: bytes) -> list[Any]:
        source = {"type": "base64", "media_type": "application/pdf"}
        source["data"] = base64.b64encode(raw).decode()
        return [{"role": "user", "content": [{"type": "document", "source": source}]}]

    text = translator().messages([], document(tiny_pdf("Invoice 40817365")))[0]["content"]
    assert "Invoice 40817365" in text and "<<<UNTRUSTED" in text
    scan = translator().messages([], document(tiny_pdf(None)))[0]["content"]
    assert "no text could be read" in scan and "scan" in scan
    broken = translator().messages([], document(b"%PDF-1.4 not really"))[0]["content"]
    assert "no text could be read" in broken


@pytest.mark.parametrize(
    ("message", "tokens", "limit"),
    [
        (
            "This model's maximum context length is 32768 tokens. However, your messages "
            "resulted in 40211 tokens. Please reduce the length of the messages.",
            40211,
            32768,
        ),
        (  # vLLM and OpenAI's newer wording, with the completion counted apart
            "This model's maximum context length is 8192 tokens. However, you requested "
            "9000 tokens (8000 in the messages, 1000 in the completion).",
            8000,
            8192,
        ),
    ],
)
def test_context_length_errors_in_openai_wording_name_both_numbers(
    message: str, tokens: int, limit: int
) -> None:
    found = overflow(message, {"error": {"code": "context_length_exceeded"}})
    assert found is not None and (found.tokens, found.limit) == (tokens, limit)
    assert overflow("The model `x` does not exist", {}) is None


async def test_doctor_names_a_model_the_server_does_not_offer_and_an_unused_provider(
    fake_openai: FakeOpenAI,
) -> None:
    local = ProviderConfig(kind="openai", base_url=fake_openai.url, api_key="sk-test")
    config = Config(
        agent=AgentConfig(model=MODEL, fallback_models=["local:gpt-missing"]),
        providers={"local": local, "spare": local},
    )
    found = {check.name: check for check in await check_providers(config)}
    assert found["local"].status == FAIL
    assert "does not offer local:gpt-missing (it lists: gpt-test)" in found["local"].detail
    assert "agent.fallback_models" in found["local"].detail
    assert found["spare"].status == WARN and "no id in agent.model" in found["spare"].detail
    assert "anthropic" not in found  # no listed model is Anthropic's: nothing to check


def client(fake: FakeOpenAI, key: str = "sk-test", **models: ModelConfig) -> ModelClient:
    provider = ProviderConfig(kind="openai", base_url=fake.url, api_key=key, max_retries=0)
    config = Config(agent=AgentConfig(model=MODEL), providers={"local": provider})
    config.models.update(models)
    return ModelClient(config)


async def test_a_streamed_reply_with_tool_call_deltas_and_cached_usage(
    fake_openai: FakeOpenAI,
) -> None:
    shown: list[str] = []
    started: list[str] = []

    async def on_text(delta: str) -> None:
        shown.append(delta)

    async def on_tool(name: str) -> None:
        started.append(name)

    long_system: list[Any] = [{"type": "text", "text": "You are Krill. " * 600}]
    hello: list[Any] = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    fake_openai.queue(ChatReply.calling("memory_append", {"text": "x" * 80}, text="Saving it."))
    model = client(fake_openai)
    try:
        first = await model.complete(
            system=long_system, messages=hello, on_text=on_text, on_tool_start=on_tool
        )
        again = await model.complete(system=long_system, messages=hello)
    finally:
        await model.close()
    assert "".join(shown) == "Saving it." and len(shown) == 1 and started == ["memory_append"]
    assert first.stop_reason == "tool_use" and first.model == MODEL
    assert first.tool_uses[0]["input"] == {"text": "x" * 80}
    assert first.tool_uses[0]["name"] == "memory_append"
    assert first.usage.cache_read_tokens == 0 and first.usage.input_tokens > 1024
    # The same prefix again: the server read it from its cache, and said so.
    assert again.usage.cache_read_tokens >= 1024
    assert again.usage.input_tokens + again.usage.cache_read_tokens == first.usage.input_tokens
    body = fake_openai.chat_requests[0].body
    assert body["stream_options"] == {"include_usage": True} and body["max_tokens"] == 4096


async def test_failures_become_krill_errors(fake_openai: FakeOpenAI) -> None:
    hello: list[Any] = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    fake_openai.queue(
        ChatError(429, "Rate limit reached", "requests", headers={"retry-after": "90"})
    )
    model = client(fake_openai)
    wrong = client(fake_openai, key="sk-wrong")
    small = FakeOpenAI(models={"gpt-test": ModelSpec(context_window=100)})
    try:
        with pytest.raises(ModelRateLimited) as limited:
            await model.complete(system=[], messages=hello)
        with pytest.raises(ModelAuthError) as refused:
            await wrong.complete(system=[], messages=hello)
        async with small:
            tight = client(small)
            big: list[Any] = [{"role": "user", "content": [{"type": "text", "text": "w " * 500}]}]
            with pytest.raises(ContextOverflow) as overflowed:
                await tight.complete(system=[], messages=big)
            await tight.close()
        unknown = client(fake_openai)
        unknown.config.agent.model = "local:no-such-model"
        with pytest.raises(ModelError) as missing:
            await unknown.complete(system=[], messages=hello)
        await unknown.close()
    finally:
        await model.close()
        await wrong.close()
    assert limited.value.retry_after == 90 and limited.value.falls_back
    assert "providers.local.api_key" in refused.value.user_message
    assert overflowed.value.limit == 100 and overflowed.value.tokens is not None
    assert "does not exist" in str(missing.value) and not missing.value.falls_back
    assert json.loads(json.dumps(fake_openai.chat_requests[-1].body))["model"] == "no-such-model"
