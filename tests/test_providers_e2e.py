"""Models and providers end to end: the real `krill run` against the fake Anthropic API and the
fake OpenAI-compatible server.

- Anthropic answering 529 to everything: the person still gets an answer, from the fallback
  model on the OpenAI-compatible provider, with the notice; the next turn skips Anthropic
  while it cools down, and once the cool-down is over (a restart with the test clock moved
  on, no waiting) Anthropic is asked first again and answers.
- A fallback model with a smaller window (32k) gets a request that fits it, summarized by
  itself within the same turn; a compaction while Sonnet cools down is sized for it too.
- A 400 from Anthropic is the request's fault: no fallback.
- A conversation entirely on the OpenAI-compatible provider: tools (memory_append,
  reminder_create), a photo, a streamed reply, and compaction past the 32k window the
  server names in its error, with the identifiers kept.
- `/model local:…` switches a DM to the other provider.
- `krill doctor` names the provider whose key is wrong.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
from PIL import Image

from bot.context.compaction.prompts import SUMMARIZER_SYSTEM
from tests.channel_env import telegram_section
from tests.fakes.anthropic import ErrorReply, FakeAnthropic
from tests.fakes.openai import ChatReply, FakeOpenAI, ModelSpec
from tests.fakes.telegram import FakeTelegram
from tests.krill_process import KrillProcess, run_cli

SONNET = "claude-sonnet-4-6"
LOCAL = "local:gpt-test"
SMALL = "local:gpt-small"
REQUIRED_MARK = "copy each one exactly under ## Exact identifiers:\n"
FILLER = "Some background on the migration plan that makes this message long. " * 120
TIMEOUT = 20.0
CONSOLE_TOKEN = "console-token-for-the-tests-0123"


def local_provider(fake: FakeOpenAI) -> dict[str, Any]:
    return {"kind": "openai", "base_url": fake.url, "api_key_env": "LOCAL_KEY"}


def settings(fake: FakeOpenAI, **sections: dict[str, Any]) -> dict[str, Any]:
    base: dict[str, Any] = {
        "agent": {"sender_turns_per_minute": 0, "fallback_models": [LOCAL]},
        "anthropic": {"max_retries": 2},
        "providers": {"local": local_provider(fake)},
        "memory": {"flush": {"enabled": False}},
        "scheduler": {"idle_compaction": False},
    }
    for name, section in sections.items():
        base[name] = base.get(name, {}) | section
    return base


def env(anthropic: FakeAnthropic, fake: FakeOpenAI) -> dict[str, str]:
    return anthropic.env() | {"LOCAL_KEY": "sk-test"}


def plain_echo(body: dict[str, Any]) -> str:
    """The person's words only, as the OpenAI fake's echo says them."""
    text = "".join(b.get("text", "") for b in body["messages"][-1]["content"])
    return f"echo: {text.split(chr(10))[-2] if '<<<END_UNTRUSTED' in text else text}"


def overloaded(_body: dict[str, Any]) -> ErrorReply:
    return ErrorReply(529, "overloaded_error", "Overloaded")


async def console_health(krill: KrillProcess) -> str:
    headers = {"Authorization": f"Bearer {CONSOLE_TOKEN}"}
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{krill.url}/admin/health", headers=headers) as resp:
            assert resp.status == 200
            return await resp.text()


async def status_line(krill: KrillProcess, user: str) -> str:
    reply = await krill.chat("/status", user=user)
    return "\n".join(reply["replies"])


async def test_an_overloaded_anthropic_falls_back_with_a_notice_then_comes_back(
    tmp_path: Path, fake_anthropic: FakeAnthropic, fake_openai: FakeOpenAI
) -> None:
    anthropic, fake = fake_anthropic, fake_openai
    anthropic.default_handler = overloaded
    config = settings(fake, admin={"console_token": CONSOLE_TOKEN})
    async with KrillProcess(tmp_path, config, env(anthropic, fake)) as krill:
        first = await krill.chat("What is the capital of France?", user="ann")
        assert len(anthropic.message_requests) == 1  # not retried: a fallback was waiting
        second = await krill.chat("And of Spain?", user="ann")
        status = await status_line(krill, "ann")
        _, metrics = await krill.get("/metrics")
        health = await console_health(krill)
    reply = "\n".join(first["replies"])
    assert "echo: What is the capital of France?" in reply
    assert f"{LOCAL} wrote this answer: {SONNET} is overloaded right now." in reply
    # Cooling down: the second turn went straight to the fallback model, and said so.
    assert len(anthropic.message_requests) == 1
    assert "echo: And of Spain?" in "\n".join(second["replies"])
    assert f"{LOCAL} wrote this answer" in "\n".join(second["replies"])
    assert [r.body["model"] for r in fake.chat_requests] == ["gpt-test", "gpt-test"]
    assert f"last turn answered by {LOCAL}" in status
    assert (
        f'krill_model_fallbacks_total{{model="{SONNET}",provider="anthropic",to="{LOCAL}"}} 1.0'
        in metrics
    )
    assert (
        f'krill_model_failures_total{{kind="overloaded",model="{SONNET}",provider="anthropic"}} 1.0'
        in metrics
    )
    assert f'krill_model_calls_total{{model="{LOCAL}",provider="local"}} 2.0' in metrics
    # The console's health page: one row per model, Sonnet skipped for now.
    rows = [r for r in health.split('data-testid="model-row"')[1:]]
    assert len(rows) == 2
    assert f"<td>{SONNET}</td><td>1</td><td>1</td><td>1</td>" in rows[0]
    assert "skipped: overloaded" in rows[0]
    assert f"<td>{LOCAL}</td><td>2</td><td>0</td><td>0</td>" in rows[1] and "in use" in rows[1]

    # Past the cool-down (the service's clock a minute and more ahead): Anthropic first.
    anthropic.default_handler = lambda body: "Madrid, from Claude."
    later = settings(fake, scheduler={"clock_offset_seconds": 61})
    async with KrillProcess(tmp_path, later, env(anthropic, fake)) as krill:
        third = await krill.chat("And of Italy?", user="ann")
    assert third["replies"] == ["Madrid, from Claude."]
    assert len(anthropic.message_requests) == 2 and len(fake.chat_requests) == 2


async def test_a_cool_down_is_shared_by_a_restart_until_it_ends(
    tmp_path: Path, fake_anthropic: FakeAnthropic, fake_openai: FakeOpenAI
) -> None:
    anthropic, fake = fake_anthropic, fake_openai
    anthropic.default_handler = overloaded
    hour = {"fallback_cooldown_seconds": 3600}  # however slowly the second process starts
    async with KrillProcess(tmp_path, settings(fake, agent=hour), env(anthropic, fake)) as krill:
        await krill.chat("first", user="bo")
    anthropic.default_handler = lambda body: "from Claude"
    # Half-way through the cool-down (another replica, or this one restarted): still skipped;
    # with agent.fallback_notice off the answer comes without the line.
    quiet = hour | {"fallback_notice": False}
    during = settings(fake, agent=quiet, scheduler={"clock_offset_seconds": 1800})
    async with KrillProcess(tmp_path, during, env(anthropic, fake)) as krill:
        reply = await krill.chat("second", user="bo")
    assert "echo: second" in reply["replies"][0]
    assert "wrote this answer" not in "\n".join(reply["replies"])
    assert len(anthropic.message_requests) == 1


async def test_a_400_from_anthropic_does_not_fall_back(
    tmp_path: Path, fake_anthropic: FakeAnthropic, fake_openai: FakeOpenAI
) -> None:
    anthropic, fake = fake_anthropic, fake_openai
    anthropic.queue_error(400, "invalid_request_error", "messages.0.content: bad block")
    async with KrillProcess(tmp_path, settings(fake), env(anthropic, fake)) as krill:
        reply = await krill.chat("hello", user="cy")
        _, metrics = await krill.get("/metrics")
    assert fake.chat_requests == []
    assert "couldn't reach the model" in reply["replies"][0]
    assert "krill_model_fallbacks_total{" not in metrics
    assert 'kind="rejected"' in metrics


async def test_model_command_switches_a_dm_to_the_other_provider(
    tmp_path: Path, fake_anthropic: FakeAnthropic, fake_openai: FakeOpenAI
) -> None:
    anthropic, fake = fake_anthropic, fake_openai
    anthropic.default_handler = plain_echo
    config = settings(fake, agent={"models": [SONNET, LOCAL], "fallback_models": []})
    async with KrillProcess(tmp_path, config, env(anthropic, fake)) as krill:
        assert (await krill.chat("on claude", user="di"))["replies"] == ["echo: on claude"]
        switched = await krill.chat(f"/model {LOCAL}", user="di")
        after = await krill.chat("on the local server", user="di")
        listed = await krill.chat("/model", user="di")
    assert f"Model switched to {LOCAL}" in switched["replies"][0]
    assert after["replies"] == ["echo: on the local server"]
    assert len(anthropic.message_requests) == 1 and len(fake.chat_requests) == 1
    assert f"▶ {LOCAL} (current)" in listed["replies"][0]


async def test_doctor_names_the_provider_whose_key_is_wrong(
    tmp_path: Path, fake_anthropic: FakeAnthropic, fake_openai: FakeOpenAI
) -> None:
    from tests.krill_process import write_config

    config = write_config(tmp_path, settings(fake_openai))
    wrong = fake_anthropic.env() | {"LOCAL_KEY": "sk-wrong-key"}
    code, out, _ = await run_cli(tmp_path, "doctor", "--config", str(config), env=wrong)
    assert code == 1, out
    found = next(line for line in out.splitlines() if line.startswith("[FAIL] local:"))
    assert "rejected the API key (401)" in found and "LOCAL_KEY" in found
    assert "[ok] anthropic:" in out
    assert f"no price known for {LOCAL}" in out  # a warning, not a failure

    right = fake_anthropic.env() | {"LOCAL_KEY": "sk-test"}
    code, out, _ = await run_cli(tmp_path, "doctor", "--config", str(config), env=right)
    assert "[ok] local:" in out and f"offers {LOCAL}" in out, out


# --------------------------------------------------------------------------- all on OpenAI


def summary(body: dict[str, Any]) -> str:
    """Five sections and every identifier the prompt asks for."""
    prompt = body["messages"][-1]["content"]
    ids = prompt.split(REQUIRED_MARK, 1)[1].split("\n\n", 1)[0] if REQUIRED_MARK in prompt else ""
    return (
        "## Decisions\n- none\n## Open TODOs\n- none\n## Constraints/Rules\n- none\n"
        "## Pending user asks\n- background on the migration plan\n"
        "## Exact identifiers\n" + ids
    )


def is_summary(body: dict[str, Any]) -> bool:
    first = body["messages"][0]
    return first["role"] == "system" and first["content"] == SUMMARIZER_SYSTEM


def tool_results(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"][-2:] if m["role"] == "tool"]


def script(body: dict[str, Any]) -> ChatReply | str:
    """The assistant: saves a note and sets a reminder when asked, summarizes when asked."""
    if is_summary(body):
        return summary(body)
    last = body["messages"][-1]
    if last["role"] == "tool":
        return f"Done ({last['content'][:60]})."
    text = last["content"] if isinstance(last["content"], str) else json.dumps(last["content"])
    if "note that" in text:
        return ChatReply.calling("memory_append", {"text": "The vault code is ZX-4471."})
    if "remind me" in text:
        return ChatReply.calling("reminder_create", {"when": "in 2 hours", "text": "feed the cat"})
    if "what is the vault code" in text:
        found = "ZX-4471" in json.dumps(body)
        return "It is ZX-4471." if found else "I no longer know."
    return "Noted. " * 60 if "long answer" in text else "Noted."


def photo() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (320, 200), (200, 30, 30)).save(out, "PNG")
    return out.getvalue()


async def bot_reply(tg: FakeTelegram, chat: int, needle: str) -> str:
    async with asyncio.timeout(TIMEOUT):
        while True:
            for message in tg.bot_messages(chat):
                if needle in message.get("text", ""):
                    return str(message["text"])
            await asyncio.sleep(0.05)


async def test_a_conversation_runs_entirely_on_the_openai_provider(
    tmp_path: Path, fake_anthropic: FakeAnthropic, fake_telegram: FakeTelegram
) -> None:
    async with FakeOpenAI(models={"gpt-small": ModelSpec(context_window=32_768)}) as fake:
        fake.default_handler = script
        config = settings(
            fake,
            agent={"model": SMALL, "fallback_models": [], "sender_turns_per_minute": 0},
            context={"reserve_tokens": 4_000, "reserve_tokens_floor": 4_000},
            telegram=telegram_section(fake_telegram, mode="polling"),
        )
        # No Anthropic key at all: nothing of this conversation needs one.
        async with KrillProcess(tmp_path, config, {"LOCAL_KEY": "sk-test"}) as krill:
            saved = await krill.chat("Please note that the vault code is ZX-4471.", user="eve")
            reminded = await krill.chat("Please remind me to feed the cat.", user="eve")
            fake.chunk_delay = 0.05
            async with aiohttp.ClientSession() as http:
                async with http.ws_connect(f"{krill.url}/ws/chat?name=eve") as ws:
                    await ws.send_json({"text": "Give me a long answer."})
                    events: list[dict[str, Any]] = []
                    while not events or events[-1]["type"] != "message":
                        events.append(await asyncio.wait_for(ws.receive_json(), TIMEOUT))
            fake.chunk_delay = 0.0
            fake_telegram.push_update(
                fake_telegram.photo_message(501, 501, caption="what colour?", data=photo())
            )
            await bot_reply(fake_telegram, 501, "Noted.")
            for i in range(18):  # past the 32k window the server names
                await krill.chat(f"Message {i}. {FILLER}", user="eve")
            answer = await krill.chat("So, what is the vault code?", user="eve")
            _, out, _ = await run_cli(
                tmp_path, "status", "--json", "--config", str(krill.config_path)
            )
            _, reminders, _ = await run_cli(
                tmp_path, "reminders", "list", "--config", str(krill.config_path)
            )
    assert fake_anthropic.message_requests == []
    assert saved["replies"][0].startswith("Done (")
    notes = list((tmp_path / "workspace" / "memory").rglob("*.md"))
    assert any("ZX-4471" in n.read_text() for n in notes)
    assert "Done (" in reminded["replies"][0] and "feed the cat" in reminders
    # Streamed: previews, then the whole reply.
    assert "preview" in [e["type"] for e in events] and events[-1]["text"].startswith("Noted.")
    # The photo reached the server as a data URL.
    photo_request = next(r for r in fake.chat_requests if "image_url" in json.dumps(r.body))
    parts = [
        p for m in photo_request.messages if isinstance(m["content"], list) for p in m["content"]
    ]
    assert any(p["image_url"]["url"].startswith("data:image/") for p in parts if "image_url" in p)
    # Compacted past the window the server named, and the identifier survived it.
    assert any(is_summary(r.body) for r in fake.chat_requests)
    assert answer["replies"] == ["It is ZX-4471."]
    sessions = json.loads(out)["sessions"]
    eve = next(s for s in sessions if s["session_key"].endswith(":eve"))
    assert eve["compaction"]["window"] == 32_768
    assert eve["compaction"]["window_source"] == "learned"
    assert eve["compaction_count"] >= 1
    # Every request after the window was learned fitted it.
    refused = [r for r in fake.chat_requests if r.usage is None]
    assert len(refused) <= 1
    # Automatic prefix caching: cached prompt tokens were reported and counted.
    assert eve["cache_read_tokens"] > 0


@contextlib.asynccontextmanager
async def on_sonnet_with_a_small_fallback(
    tmp_path: Path, anthropic: FakeAnthropic
) -> AsyncIterator[tuple[FakeOpenAI, KrillProcess]]:
    """`krill run` on Sonnet (answering "Noted."), falling back to a model with a 32k window."""
    async with FakeOpenAI(models={"gpt-small": ModelSpec(context_window=32_768)}) as fake:
        fake.default_handler = script
        anthropic.default_handler = lambda body: "Noted."
        config = settings(
            fake,
            agent={"fallback_models": [SMALL], "sender_turns_per_minute": 0},
            context={"reserve_tokens": 4_000, "reserve_tokens_floor": 4_000},
            models={SMALL: {"context_window": 32_768}},
        )
        async with KrillProcess(tmp_path, config, env(anthropic, fake)) as krill:
            yield fake, krill


async def long_history(krill: KrillProcess, user: str) -> None:
    """~40k tokens: fine for Sonnet's window, too much for the fallback's."""
    await krill.chat("Please keep in mind: the vault code is ZX-4471.", user=user)
    for i in range(18):
        await krill.chat(f"Message {i}. {FILLER}", user=user)


async def test_a_fallback_model_with_a_smaller_window_gets_a_request_that_fits_it(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    async with on_sonnet_with_a_small_fallback(tmp_path, fake_anthropic) as (fake, krill):
        await long_history(krill, "fay")
        assert fake.chat_requests == []
        fake_anthropic.default_handler = overloaded
        answer = await krill.chat("So, what is the vault code?", user="fay")
    reply = "\n".join(answer["replies"])
    assert "It is ZX-4471." in reply and f"{SMALL} wrote this answer" in reply
    # Within that one turn the fallback model summarized the history for its own window,
    # and no request it was sent was refused as too long.
    assert any(is_summary(r.body) for r in fake.chat_requests)
    assert all(r.usage is not None for r in fake.chat_requests)


async def test_a_compaction_during_a_cool_down_is_sized_for_the_fallback_model(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    async with on_sonnet_with_a_small_fallback(tmp_path, fake_anthropic) as (fake, krill):
        await long_history(krill, "gus")
        # Another conversation finds Sonnet overloaded: it cools down for everyone.
        fake_anthropic.default_handler = overloaded
        await krill.chat("hello", user="hal")
        asked = len(fake_anthropic.message_requests)
        compacted = await krill.chat("/compact", user="gus")
    assert "failed" not in compacted["replies"][0]
    assert len(fake_anthropic.message_requests) == asked  # Sonnet was left to cool down
    summaries = [r for r in fake.chat_requests if is_summary(r.body)]
    assert summaries and all(r.usage is not None for r in summaries), compacted
