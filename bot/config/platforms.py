"""Configuration shared by the chat platforms (access policy, history limits, per-DM and
per-group overrides) and the `[telegram]` and `[slack]` sections built on it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Literal

from pydantic import Field, field_validator

from bot.config.sections import Section


class ToolFilterConfig(Section):
    """A `tools = {allow, deny}` table on a channel, group or DM: narrows the global [tools]."""

    allow: list[str] = Field(default_factory=lambda: ["*"])
    deny: list[str] = Field(default_factory=list)


class PeerOverride(Section):
    """Per-user (`dms."<id>"`) settings."""

    history_limit: int | None = Field(None, ge=0)
    tools: ToolFilterConfig | None = None  # applies in this user's DM only


class GroupOverride(Section):
    """Per-group / per-channel settings."""

    require_mention: bool | None = None
    history_limit: int | None = Field(None, ge=0)
    allow: bool | None = None
    tools: ToolFilterConfig | None = None


# What Slack accepts as an emoji name in reactions.add (custom emoji included).
_SLACK_EMOJI_NAME = re.compile(r"[a-z0-9_+'-]+(?:::skin-tone-[2-6])?")

DmPolicy = Literal["allowlist", "open", "pairing", "disabled"]
GroupPolicy = Literal["open", "allowlist", "disabled"]


class ChannelPolicyConfig(Section):
    """Access and history settings shared by the chat platforms."""

    enabled: bool = False
    dm_policy: DmPolicy = "allowlist"
    allow_from: list[str] = Field(default_factory=list)
    group_policy: GroupPolicy = "open"
    require_mention: bool = True
    dm_history_limit: int = Field(0, ge=0)
    history_limit: int = Field(0, ge=0)
    group_buffer_limit: int = Field(50, ge=0)
    dms: dict[str, PeerOverride] = Field(default_factory=dict)
    tools: ToolFilterConfig = Field(default_factory=ToolFilterConfig)  # every chat on the channel

    def group_overrides(self) -> Mapping[str, GroupOverride]:
        raise NotImplementedError


class TelegramPacing(Section):
    """`[telegram.pacing]`: how fast Krill sends, below Telegram's flood limits. Previews,
    final messages and edits all count."""

    chat_interval: float = Field(1.0, ge=0)  # seconds between messages to one chat
    group_messages: int = Field(20, ge=1)  # messages to one group per group_period
    group_period: float = Field(60.0, ge=0)
    overall_per_second: int = Field(30, ge=1)  # messages per second across all chats


class SlackPacing(Section):
    """`[slack.pacing]`: posts and edits per channel, below Slack's rate limits."""

    channel_interval: float = Field(1.0, ge=0)  # seconds between messages to one channel


class PlatformTimeouts(Section):
    """`[telegram.timeouts]` and `[slack.timeouts]`: how long, in seconds, each step of one
    Bot API or Web API call may take. A send whose answer does not come within `read` may
    still have arrived, so the outbox treats it as an unknown outcome, never as a failure to
    repeat at once (README "Slow platforms")."""

    connect: float = Field(10.0, gt=0)  # opening a connection to the API
    pool: float = Field(10.0, gt=0)  # waiting for a free connection of the client's pool
    write: float = Field(30.0, gt=0)  # sending the request (each part of an upload's body)
    read: float = Field(30.0, gt=0)  # waiting for the answer (long polls add their own wait)


class TelegramConfig(ChannelPolicyConfig):
    token: str = ""
    mode: Literal["polling", "webhook"] = "polling"
    api_base_url: str = "https://api.telegram.org"
    webhook_url: str = ""
    webhook_secret: str = ""
    groups: dict[str, GroupOverride] = Field(default_factory=dict)
    stream_interval: float = Field(1.5, ge=0)  # seconds between draft edits; 0 disables streaming
    pacing: TelegramPacing = Field(default_factory=TelegramPacing)
    # Reaction on a message while its answer is worked on, and the one that replaces it when
    # the turn is over; "" for none. Only the Bot API's reaction emoji are accepted.
    ack_reaction: str = "👀"
    done_reaction: str = "👍"
    timeouts: PlatformTimeouts = Field(default_factory=PlatformTimeouts)
    # What happens to a reply chunk whose sendMessage got no answer within timeouts.read
    # (Telegram cannot say whether it arrived): false marks it "maybe sent" after waiting as
    # long again, true sends it again after that wait (a possible duplicate).
    resend_after_timeout: bool = False

    def group_overrides(self) -> Mapping[str, GroupOverride]:
        return self.groups

    @property
    def polling_lock(self) -> str:
        """The leader lock long polling runs under: one per bot (its id is the token's part
        before ':'), so of the replicas sharing a store only one polls that bot."""
        return f"telegram:{self.token.partition(':')[0]}"


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

    @field_validator("ack_reaction", "done_reaction")
    @classmethod
    def _emoji_name(cls, value: str) -> str:
        name = value.strip().strip(":")
        if name and not _SLACK_EMOJI_NAME.fullmatch(name):
            raise ValueError(f"{value!r} is not a Slack emoji name such as 'eyes' or '+1'")
        return name

    def group_overrides(self) -> Mapping[str, GroupOverride]:
        return self.channels
