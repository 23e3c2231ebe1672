"""The `[telegram]` section: the bot token and how updates arrive (long polling or a
webhook), the access policy every chat platform shares, per-group overrides, pacing below
Telegram's flood limits, the reactions shown while a reply is worked on, and how long a Bot
API call may take and what becomes of a send that got no answer in time."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Literal

from pydantic import Field

from bot.config import ChannelPolicyConfig, GroupOverride, Section
from channels.timeouts import PlatformTimeouts


class TelegramPacing(Section):
    """`[telegram.pacing]`: how fast Krill sends, below Telegram's flood limits. Previews,
    final messages and edits all count."""

    chat_interval: float = Field(1.0, ge=0)  # seconds between messages to one chat
    group_messages: int = Field(20, ge=1)  # messages to one group per group_period
    group_period: float = Field(60.0, ge=0)
    overall_per_second: int = Field(30, ge=1)  # messages per second across all chats


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

    secret_env: ClassVar[Mapping[str, str]] = {"token": "TELEGRAM_BOT_TOKEN"}

    def problems(self) -> list[str]:
        found = []
        if self.enabled and not self.token:
            found.append(
                "telegram.token: required when telegram.enabled (or set TELEGRAM_BOT_TOKEN)"
            )
        if self.enabled and self.mode == "webhook" and not self.webhook_secret:
            found.append("telegram.webhook_secret: required in webhook mode")
        return found

    def secrets(self) -> list[str]:
        return [self.token, self.webhook_secret]

    def group_overrides(self) -> Mapping[str, GroupOverride]:
        return self.groups

    @property
    def polling_lock(self) -> str:
        """The leader lock long polling runs under: one per bot (its id is the token's part
        before ':'), so of the replicas sharing a store only one polls that bot."""
        return f"telegram:{self.token.partition(':')[0]}"
