"""Names beside session keys, end to end through the real `krill run`: Telegram's sender and
group title, a forum topic's name, Slack's display name (users.info) and channel name
(conversations.info, looked up in the background), shown in the console's sessions list;
a Slack app without users:read still answers, shows the key alone and warns once; and
`krill sessions list` shows the names too."""

from __future__ import annotations

import asyncio
import html
import re
from pathlib import Path

import aiohttp

from tests.channel_env import ChannelKrill, channel_config, start_channel_krill
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.slack import FakeSlack
from tests.fakes.telegram import FakeTelegram
from tests.krill_process import run_cli
from tests.test_e2e_local import plain_echo

TOKEN = "names-Token_4711-long-enough"
ROW = re.compile(r'<tr data-testid="session-row" data-key="([^"]+)"><td>(.*?)</td>')
NAME = re.compile(r'data-testid="session-name">([^<]*)<')
SCOPE_WARNING = "slack: users.info failed (missing_scope)"


async def names_listed(env: ChannelKrill) -> dict[str, str]:
    """Session key -> the name the console's sessions list shows beside it ("" for none)."""
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"{env.krill.url}/admin", headers=headers) as resp,
    ):
        assert resp.status == 200
        page = await resp.text()
    found = {}
    for key, cell in ROW.findall(page):
        name = NAME.search(cell)
        found[html.unescape(key)] = html.unescape(name.group(1)) if name else ""
    return found


async def listed_with(env: ChannelKrill, key: str, name: str) -> dict[str, str]:
    async with asyncio.timeout(10):
        while (listed := await names_listed(env)).get(key) != name:  # noqa: ASYNC110 (a page)
            await asyncio.sleep(0.1)
    return listed


async def test_names_from_telegram_and_slack_show_beside_their_keys(
    tmp_path: Path,
    fake_telegram: FakeTelegram,
    fake_slack: FakeSlack,
    fake_anthropic: FakeAnthropic,
) -> None:
    fake_anthropic.default_handler = plain_echo
    tg, slack = fake_telegram, fake_slack
    config = channel_config(tg, slack, admin={"console_token": TOKEN})
    env = await start_channel_krill(tmp_path, tg, slack, fake_anthropic, config)
    try:
        await env.telegram(
            tg.private_message(501, "hi from ada", first_name="Ada", last_name="Lovelace")
        )
        await env.telegram_reply(501, "echo: hi from ada")
        await env.telegram(tg.group_message(-100777, 502, "hi ops", mention=True, title="Ops room"))
        await env.telegram_reply(-100777, "echo: hi ops")
        await env.telegram(
            tg.group_message(
                -100778, 502, "hi crew", mention=True, title="Crew", topic_message=True, thread_id=5
            )
        )
        await env.telegram_reply(-100778, "echo: hi crew")

        slack.set_user("UGRACE", profile={"display_name": "Grace H"})
        slack.set_channel("C77", name="ops-chat")
        await env.slack_event(slack.im_message("UGRACE", "hi from grace", channel="D7"))
        await env.slack_reply("D7", "echo: hi from grace")
        mention = slack.app_mention("C77", "UGRACE", "hi channel")
        await env.slack_event(mention)
        await env.slack_reply("C77", "echo: hi channel")

        # A mention in a channel opens a thread: its session is the thread's.
        thread = f"agent:main:slack:channel:c77:thread:{mention['event']['ts']}"
        listed = await listed_with(env, thread, "#ops-chat")
        assert listed["agent:main:telegram:direct:501"] == "Ada Lovelace"
        assert listed["agent:main:telegram:group:-100777"] == "Ops room"
        assert listed["agent:main:telegram:group:-100778:topic:5"] == "Crew / Topic 5"
        assert listed["agent:main:slack:direct:ugrace"] == "Grace H"

        # An app installed without users:read: answered all the same, the key alone, and
        # one warning that says what to grant, however many people write.
        slack.revoke_scope("users:read")
        for user, channel in (("UNOSCOPE", "D8"), ("UOTHER", "D9")):
            await env.slack_event(slack.im_message(user, f"hi from {user}", channel=channel))
            await env.slack_reply(channel, f"echo: hi from {user}")
        listed = await names_listed(env)
        assert listed["agent:main:slack:direct:unoscope"] == ""
        assert listed["agent:main:slack:direct:uother"] == ""
        log = env.krill.log()
        assert log.count(SCOPE_WARNING) == 1, log
        assert "needs users:read" in log
        # `krill sessions list` names them too.
        config_path = str(env.krill.config_path)
        status, out, err = await run_cli(tmp_path, "sessions", "list", "--config", config_path)
    finally:
        await env.krill.stop()
    assert status == 0, err
    lines = {line.split()[0]: line for line in out.splitlines()}
    assert lines["agent:main:telegram:direct:501"].endswith('turns=1  "Ada Lovelace"')
    assert lines["agent:main:telegram:group:-100777"].endswith('"Ops room"')
    assert lines["agent:main:slack:direct:unoscope"].endswith("turns=1")
