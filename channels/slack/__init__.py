"""The Slack channel: DMs, channels and threads over Socket Mode or the Events API, on
slack-bolt's `AsyncApp`. `SPEC` is its entry in `channels.registry`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.channel_contract import ChannelSpec
from bot.config import Config
from channels.slack.config import SlackConfig
from channels.slack.doctor import check

if TYPE_CHECKING:
    from bot.channel_contract import Gateway
    from channels.slack.adapter import SlackChannel


def create(slack: SlackConfig, config: Config, gateway: Gateway) -> SlackChannel:
    """The Slack adapter for `[slack]`, handing messages to `gateway`."""
    # Imported here, so the platform library loads only when the channel is enabled.
    from channels.slack.adapter import SlackChannel

    return SlackChannel(
        slack,
        gateway,
        stale_after=config.server.health_stale_after,
        media_max_bytes=config.media.max_bytes if config.media.enabled else None,
    )


SPEC = ChannelSpec(name="slack", config=SlackConfig, create=create, check=check)
