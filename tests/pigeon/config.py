"""The `[pigeon]` section: the loft's token (or PIGEON_TOKEN) and name, beside the access
policy every chat platform shares."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from bot.config import ChannelPolicyConfig, GroupOverride


class PigeonConfig(ChannelPolicyConfig):
    token: str = ""
    loft: str = "rooftop"

    secret_env: ClassVar[Mapping[str, str]] = {"token": "PIGEON_TOKEN"}

    def problems(self) -> list[str]:
        if self.enabled and not self.token:
            return ["pigeon.token: required when pigeon.enabled (or set PIGEON_TOKEN)"]
        return []

    def secrets(self) -> list[str]:
        return [self.token]

    def group_overrides(self) -> Mapping[str, GroupOverride]:
        return {}
