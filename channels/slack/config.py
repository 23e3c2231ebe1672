"""The `[slack]` section: the tokens for Socket Mode or the Events API over HTTP, the access
policy every chat platform shares, per-channel overrides, pacing below Slack's rate limits,
the reactions shown while a reply is worked on, and how long a Web API call may take."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import ClassVar, Literal

from pydantic import Field, field_validator

from bot.config import ChannelPolicyConfig, GroupOverride, Section
from channels.timeouts import PlatformTimeouts

# What Slack accepts as an emoji name in reactions.add (custom emoji included).
_SLACK_EMOJI_NAME = re.compile(r"[a-z0-9_+'-]+(?:::skin-tone-[2-6])?")


class SlackPacing(Section):
    """`[slack.pacing]`: posts and edits per channel, below Slack's rate limits."""

    channel_interval: float = Field(1.0, ge=0)  # seconds between messages to one channel


class SlackConfig(ChannelPolicyConfig):
    bot_token: str = ""
    app_token: str = ""
    signing_secret: str = ""
    mode: Literal["socket", "http"] = "socket"
    api_base_url: str = "https://slack.com/api/"
    channels: dict[str, GroupOverride] = Field(default_factory=dict)
    stream_interval: float = Field(1.5, ge=0)
    pacing: SlackPacing = Field(default_factory=SlackPacing)
    allow_bots: bool = False  # answer other bots' messages (never the bot's own)
    # Emoji names (as in :eyes:) for the reaction shown while a reply is worked on where
    # Slack has no thread status, and for the one left when it is done; "" for none.
    ack_reaction: str = "eyes"
    done_reaction: str = ""
    timeouts: PlatformTimeouts = Field(default_factory=PlatformTimeouts)

    secret_env: ClassVar[Mapping[str, str]] = {
        "bot_token": "SLACK_BOT_TOKEN",
        "app_token": "SLACK_APP_TOKEN",
        "signing_secret": "SLACK_SIGNING_SECRET",
    }

    @field_validator("ack_reaction", "done_reaction")
    @classmethod
    def _emoji_name(cls, value: str) -> str:
        name = value.strip().strip(":")
        if name and not _SLACK_EMOJI_NAME.fullmatch(name):
            raise ValueError(f"{value!r} is not a Slack emoji name such as 'eyes' or '+1'")
        return name

    def problems(self) -> list[str]:
        if not self.enabled:
            return []
        found = []
        if not self.bot_token:
            found.append("slack.bot_token: required when slack.enabled (or set SLACK_BOT_TOKEN)")
        if self.mode == "socket" and not self.app_token:
            found.append("slack.app_token: required in socket mode (or set SLACK_APP_TOKEN)")
        if self.mode == "http" and not self.signing_secret:
            found.append(
                "slack.signing_secret: required in http mode (or set SLACK_SIGNING_SECRET)"
            )
        return found

    def secrets(self) -> list[str]:
        return [self.bot_token, self.app_token, self.signing_secret]

    def group_overrides(self) -> Mapping[str, GroupOverride]:
        return self.channels
