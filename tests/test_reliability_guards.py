"""Guards against people who misuse access they have, through one real `krill run`: in
`dm_scope = "main"` only admins run session commands, pairing slots cannot be blocked and
the operator lists and denies requests, Slack channel text is a command only when it
addresses the bot, and floods of commands or messages from one sender cost a bounded
number of replies and model calls."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from bot.gateway.budgets import COMMAND_REPLIES
from tests.channel_env import ChannelKrill, channel_config, start_channel_krill
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.slack import FakeSlack
from tests.fakes.telegram import FakeTelegram
from tests.krill_process import run_cli

pytestmark = pytest.mark.asyncio(loop_scope="module")

ADMIN = 42
FRIEND = 43
STRANGERS = (6101, 6102, 6103, 6104)
CODE_RE = re.compile(r"code is ([A-Z0-9]{8})")
BUDGET_LOG = "over its command budget"


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def env(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ChannelKrill]:
    directory = tmp_path_factory.mktemp("reliability-guards")
    async with FakeTelegram() as tg, FakeSlack() as slack, FakeAnthropic() as model:
        config = channel_config(
            tg,
            slack,
            telegram={"dm_policy": "pairing", "allow_from": [str(FRIEND)]},
            admin={"users": [f"telegram:{ADMIN}"]},
            session={"dm_scope": "main"},
            agent={"sender_turns_per_minute": 2},
            memory={"enabled": False},
        )
        env = await start_channel_krill(directory, tg, slack, model, config)
        try:
            yield env
        finally:
            await env.krill.stop()


async def pairing_cli(env: ChannelKrill, *args: str) -> tuple[int, str]:
    config = str(env.krill.config_path)
    rc, out, _ = await run_cli(env.krill.directory, "pairing", *args, "--config", config)
    return rc, out


async def test_in_main_scope_only_admins_run_session_commands(env: ChannelKrill) -> None:
    for command in ("/status", "/reset"):
        await env.telegram(env.tg.private_message(FRIEND, command))
        await env.telegram_reply(FRIEND, f"only an admin can use {command}")
    await env.telegram(env.tg.private_message(FRIEND, "/whoami"))
    await env.telegram_reply(FRIEND, "Session: agent:main:main")
    await env.telegram(env.tg.private_message(ADMIN, "/status"))
    await env.telegram_reply(ADMIN, "Session: agent:main:main")
    friend_saw = " ".join(m.get("text", "") for m in env.tg.bot_messages(FRIEND))
    assert "Estimated cost" not in friend_saw and "New session" not in friend_saw


async def test_pairing_slots_cannot_be_blocked_and_the_operator_denies(env: ChannelKrill) -> None:
    codes: dict[int, str] = {}
    for stranger in STRANGERS:  # one more than there are slots
        await env.telegram(env.tg.private_message(stranger, "let me in"))
        codes[stranger] = CODE_RE.findall(await env.telegram_reply(stranger, "code is"))[0]
    first, _, _, last = STRANGERS

    rc, listed = await pairing_cli(env, "list")  # every channel
    assert rc == 0
    assert f"telegram:{first}" not in listed  # the oldest request made room
    assert all(f"telegram:{s}" in listed for s in STRANGERS[1:])

    rc, out = await pairing_cli(env, "deny", "telegram", codes[last].lower())
    assert rc == 0 and f"denied telegram:{last}" in out
    await env.telegram(env.tg.private_message(last, "please?"))
    await env.telegram_reply(last, "declined")
    _, listed = await pairing_cli(env, "list", "telegram")
    assert f"telegram:{last}" not in listed and f"telegram:{STRANGERS[1]}" in listed
    rc, _ = await pairing_cli(env, "approve", "telegram", codes[last])
    assert rc == 1  # a denied request cannot be approved by its old code
    rc, _ = await pairing_cli(env, "deny", "telegram")
    assert rc == 1


async def test_slack_channel_commands_count_only_when_addressed(env: ChannelKrill) -> None:
    plain = env.slack.channel_message("C7", "U7", "/status")
    assert (await env.slack_event(plain))[0] == 200
    await env.log_line(f"buffered C7:{plain['event']['ts']}")
    assert (await env.slack_event(env.slack.app_mention("C7", "U7", "/whoami")))[0] == 200
    await env.slack_reply("C7", "You are slack:U7")
    assert not any("Session id" in text for text in env.slack.posted_texts("C7"))


async def test_command_spam_gets_at_most_the_budget_of_replies(env: ChannelKrill) -> None:
    group, spammer = -100600, 7002
    for _ in range(40):
        update = env.tg.command(group, spammer, "/help", group=True, with_bot_suffix=True)
        assert (await env.telegram(update))[0] == 200
    async with asyncio.timeout(10):
        while env.krill.log().count(BUDGET_LOG) < 40 - COMMAND_REPLIES:  # noqa: ASYNC110
            await asyncio.sleep(0.05)

    def helps() -> int:
        return sum("commands:" in m.get("text", "") for m in env.tg.bot_messages(group))

    # The answers leave through the outbox at Telegram's pace (one a second per chat); the
    # budget lines above prove the other 30 were refused, so no more can follow.
    async with asyncio.timeout(30):
        while helps() < COMMAND_REPLIES:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
    assert helps() == COMMAND_REPLIES


async def test_one_senders_flood_is_all_kept_in_few_model_calls(env: ChannelKrill) -> None:
    group, flooder = -100500, 7001
    before = len(env.model.message_requests)
    env.model.queue_text("the first one is answered")
    env.model.queue_text("the flood is answered")
    env.model.hold()
    try:
        await env.telegram(env.tg.group_message(group, flooder, "flood 0", mention=True))
        await env.model.wait_for_requests(before + 1)
        for n in range(1, 200):
            update = env.tg.group_message(group, flooder, f"flood {n}", mention=True)
            assert (await env.telegram(update))[0] == 200
    finally:
        env.model.release()
    await env.telegram_reply(group, "the flood is answered", within=20)
    requests = env.model.message_requests[before:]
    # agent.sender_turns_per_minute = 2: the second turn takes every waiting message.
    assert len(requests) == 2
    seen = " ".join(r.last_user_text for r in requests)
    assert all(f"flood {n}" in seen for n in range(200))
