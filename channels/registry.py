"""Every channel Krill can run. Adding a channel means adding its package and one line here;
the composition root (`bot.app`) and `krill doctor` read only this list."""

from __future__ import annotations

from bot.channel_contract import ChannelSpec
from channels import local, slack, telegram

CHANNELS: tuple[ChannelSpec, ...] = (local.SPEC, telegram.SPEC, slack.SPEC)
