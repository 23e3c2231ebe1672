"""Slack pacing in-process: the real Web API client paced per channel against the fake Slack
enforcing its per-channel limit (scaled down to a fraction of a second)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from bot.errors import PreviewSkipped
from bot.types import Address, OutboundMessage
from channels.slack.adapter import SlackChannel
from channels.slack.config import SlackConfig, SlackPacing
from tests.fakes.flood import SlidingLimit
from tests.fakes.slack import FakeSlack
from tests.stub_gateway import StubGateway

INTERVAL = 0.2


@pytest.fixture
async def channel(fake_slack: FakeSlack) -> AsyncIterator[SlackChannel]:
    config = SlackConfig(
        enabled=True,
        bot_token=fake_slack.bot_token,
        app_token=fake_slack.app_token,
        signing_secret=fake_slack.signing_secret,
        mode="http",
        api_base_url=fake_slack.api_url,
        pacing=SlackPacing(channel_interval=INTERVAL),
    )
    channel = SlackChannel(config, StubGateway(config))
    await channel.start()
    fake_slack.enforce_rate_limits(SlidingLimit(1, INTERVAL))
    try:
        yield channel
    finally:
        await channel.stop()


def out(text: str, channel: str = "C1", *, final: bool = True) -> OutboundMessage:
    return OutboundMessage(Address("slack", channel), text, "turn", 0, final=final)


async def test_bursts_in_two_channels_arrive_whole_in_order_without_a_429(
    fake_slack: FakeSlack, channel: SlackChannel
) -> None:
    async def burst(where: str) -> None:
        for n in range(4):
            await channel.deliver(out(f"{where} part {n}", where))

    await asyncio.gather(burst("C1"), burst("C2"))
    for where in ("C1", "C2"):
        assert fake_slack.posted_texts(where) == [f"{where} part {n}" for n in range(4)]
    assert fake_slack.flood is not None and fake_slack.flood.refused == 0


async def test_a_preview_edit_with_no_room_is_skipped_and_the_final_edit_waits(
    fake_slack: FakeSlack, channel: SlackChannel
) -> None:
    ts = await channel.deliver(out("so far", final=False))
    edit = out("so far, and more", final=False)
    edit.edit_of = ts
    with pytest.raises(PreviewSkipped):
        await channel.deliver(edit)
    assert fake_slack.calls_to("chat.update") == []
    edit.final = True
    assert await channel.deliver(edit) == ts
    assert fake_slack.message_texts("C1") == ["so far, and more"]
    assert fake_slack.flood is not None and fake_slack.flood.refused == 0
