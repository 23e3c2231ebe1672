"""What every channel's config section has in common (`ChannelSection`: on or off, the
conventional variables that fill its secrets, its checks across keys, what logs redact) and
the settings the chat platforms share (access policy, history limits, per-DM and per-group
overrides). Each channel's own section lives in its package (e.g. channels/telegram/config.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Literal

from pydantic import Field

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


DmPolicy = Literal["allowlist", "open", "pairing", "disabled"]
GroupPolicy = Literal["open", "allowlist", "disabled"]


class ChannelSection(Section):
    """A channel's `[<name>]` section; `channels.registry` gives the root config one per
    channel."""

    enabled: bool = False
    # Conventional environment variables that fill keys left empty, e.g.
    # {"token": "TELEGRAM_BOT_TOKEN"}.
    secret_env: ClassVar[Mapping[str, str]] = {}

    def problems(self) -> list[str]:
        """What is wrong across keys once secrets are filled in, one "<section>.<key>: what
        to do" line each; the loader reports them all together."""
        return []

    def secrets(self) -> list[str]:
        """Values the logs and error messages must never show."""
        return []


class ChannelPolicyConfig(ChannelSection):
    """Access and history settings shared by the chat platforms."""

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
