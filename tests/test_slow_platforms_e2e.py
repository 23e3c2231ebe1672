"""End to end: the real `krill run` against a fake Telegram and a fake Slack that carry out a
send at once but answer it late, as a slow platform does. However late the answer, the
person gets the reply once: an answer within the read timeout is waited for; past it, the
send is an unknown outcome, looked up on Slack and, on Telegram, waited out and then marked
"maybe sent" (or, when asked, sent again) rather than repeated at once.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests.channel_env import ChannelKrill, channel_config, start_channel_krill
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.slack import FakeSlack
from tests.fakes.telegram import FakeTelegram
from tests.krill_process import run_cli

pytestmark = pytest.mark.asyncio(loop_scope="module")

SHORT_READ = 2.0  # seconds: the read timeout of the runs that test what happens past it
WITHIN = 45.0


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def fakes() -> AsyncIterator[tuple[FakeTelegram, FakeSlack, FakeAnthropic]]:
    async with FakeTelegram() as tg, FakeSlack() as slack, FakeAnthropic() as model:
        yield tg, slack, model


def config(
    fakes: tuple[FakeTelegram, FakeSlack, FakeAnthropic],
    telegram: dict[str, Any],
    slack: dict[str, Any],
) -> dict[str, Any]:
    tg, fake_slack, _ = fakes
    return channel_config(
        tg,
        fake_slack,
        telegram_mode="polling",
        telegram=telegram,
        slack_settings=slack,
        memory={"enabled": False},
    )


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def defaults(
    tmp_path_factory: pytest.TempPathFactory,
    fakes: tuple[FakeTelegram, FakeSlack, FakeAnthropic],
) -> AsyncIterator[ChannelKrill]:
    """Telegram with its default timeouts; Slack with a short read timeout."""
    directory = tmp_path_factory.mktemp("slow-platforms")
    settings = config(fakes, {}, {"timeouts": {"read": SHORT_READ}})
    env = await start_channel_krill(directory, *fakes, settings)
    try:
        yield env
    finally:
        await env.krill.stop()


@pytest_asyncio.fixture(loop_scope="module")
async def start(tmp_path: Path) -> AsyncIterator[Callable[..., Awaitable[ChannelKrill]]]:
    """Starts a `krill run` with these [telegram] settings and fakes of its own (a second
    poller of the module's fake Telegram would meet 409s), stopped after the test."""
    started: list[ChannelKrill] = []
    async with FakeTelegram() as tg, FakeSlack() as slack, FakeAnthropic() as model:

        async def run(telegram: dict[str, Any]) -> ChannelKrill:
            own = (tg, slack, model)
            env = await start_channel_krill(tmp_path, *own, config(own, telegram, {}))
            started.append(env)
            return env

        try:
            yield run
        finally:
            for env in started:
                await env.krill.stop()


async def outbox(env: ChannelKrill) -> dict[str, Any]:
    command_env = env.krill.command_env()
    code, out, err = await run_cli(env.krill.directory, "status", "--json", env=command_env)
    assert code == 0, err
    return dict(json.loads(out)["outbox"])


async def settled(env: ChannelKrill, **expected: int) -> dict[str, Any]:
    """The outbox once nothing waits in it any more and its counts are `expected`."""
    async with asyncio.timeout(WITHIN):
        while True:
            found = await outbox(env)
            if found["pending"] == 0 and all(found[k] == v for k, v in expected.items()):
                return found
            await asyncio.sleep(0.3)


def sends_to(tg: FakeTelegram, chat: int) -> list[Any]:
    return [c for c in tg.calls if c.method == "sendMessage" and c.params.get("chat_id") == chat]


def copies(tg: FakeTelegram, chat: int, needle: str) -> int:
    return sum(needle in m.get("text", "") for m in tg.bot_messages(chat))


async def test_telegram_answering_after_7_or_12_seconds_gets_one_copy_each(
    defaults: ChannelKrill,
) -> None:
    env, tg = defaults, defaults.tg
    # Each reply is carried out at once and answered 7 (or 12) seconds later.
    tg.answer_late("sendMessage", 7.0, 12.0)
    tg.push_update(tg.private_message(7101, "slow telegram one"))
    tg.push_update(tg.private_message(7102, "slow telegram two"))
    summary = await settled(env, maybe_sent=0, dead=0)
    for chat, said in ((7101, "slow telegram one"), (7102, "slow telegram two")):
        assert copies(tg, chat, said) == 1
        assert len(sends_to(tg, chat)) == 1  # waited for, never sent again
    assert summary["maybe_sent_chunks"] == []


async def test_slack_answering_past_the_timeout_is_looked_up_and_posted_once(
    defaults: ChannelKrill,
) -> None:
    env, slack = defaults, defaults.slack
    slack.answer_late("chat.postMessage", SHORT_READ + 3)
    event = slack.im_message("U7201", "slow slack", channel="D7201")
    assert (await env.slack_event(event))[0] == 200
    await slack.wait_for(
        "conversations.history",
        timeout=WITHIN,
        predicate=lambda p: p.get("channel") == "D7201",
    )
    await settled(env, maybe_sent=0, dead=0)
    assert sum("slow slack" in t for t in slack.posted_texts("D7201")) == 1
    posts = [p for p in slack.calls_to("chat.postMessage") if p.get("channel") == "D7201"]
    assert len(posts) == 1
    assert "it may have arrived" in env.krill.log()


async def test_telegram_past_the_timeout_is_marked_maybe_sent_not_repeated(
    start: Callable[..., Awaitable[ChannelKrill]],
) -> None:
    env = await start({"timeouts": {"read": SHORT_READ}})
    tg, model = env.tg, env.model
    chat = 7301
    model.queue_text("First part. " + "Filler words. " * 250 + "\n\nSecond part. " + "More. " * 150)
    tg.answer_late("sendMessage", SHORT_READ + 4)  # the first part only
    tg.push_update(tg.private_message(chat, "a long answer please"))
    summary = await settled(env, maybe_sent=1, dead=0)
    (maybe,) = summary["maybe_sent_chunks"]
    assert (maybe["chat_id"], maybe["chunk_index"], maybe["chunk_count"]) == (str(chat), 0, 2)
    texts = [m["text"] for m in tg.bot_messages(chat)]
    # The late part did arrive, once; the next part says it may be missing.
    assert len(texts) == 2 and texts[0].startswith("First part.")
    notice = "⚠️ Part 1 of 2 may be missing: it was sent but never confirmed.\n\nSecond part."
    assert texts[1].startswith(notice)
    assert len(sends_to(tg, chat)) == 2
    _, metrics = await env.krill.get("/metrics")
    assert 'krill_outbox_maybe_sent_total{channel="telegram"} 1.0' in metrics
    code, out, _ = await run_cli(env.krill.directory, "status", env=env.krill.command_env())
    assert code == 0 and f"maybe sent: telegram:{chat} part 1 of 2" in out


async def test_telegram_resends_after_waiting_the_timeout_again_when_asked(
    start: Callable[..., Awaitable[ChannelKrill]],
) -> None:
    env = await start({"timeouts": {"read": SHORT_READ}, "resend_after_timeout": True})
    tg = env.tg
    chat = 7401
    tg.answer_late("sendMessage", SHORT_READ + 4)
    tg.push_update(tg.private_message(chat, "resend me"))
    await settled(env, maybe_sent=0, dead=0)
    first, again = sends_to(tg, chat)
    # Not at once: the read timeout, then as long again.
    assert again.at - first.at >= 2 * SHORT_READ - 0.1
    assert copies(tg, chat, "resend me") == 2  # the duplicate this setting accepts
