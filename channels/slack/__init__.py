"""The Slack channel: DMs, channels and threads over Socket Mode or the Events API, on
slack-bolt's `AsyncApp`. `bot.app` calls `create` when `[slack] enabled = true`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from channels.slack.adapter import SlackChannel

if TYPE_CHECKING:
    from bot.config import Config
    from bot.gateway.service import GatewayService

__all__ = ["SlackChannel", "create"]


def create(config: Config, core: GatewayService) -> SlackChannel:
    """The Slack adapter for `config.slack`, handing messages to `core`."""
    return SlackChannel(config.slack, core)
