"""The `[local]` section: the web chat at `/` (on by default) and the token it requires when
the server listens beyond loopback. `krill chat` works regardless."""

from __future__ import annotations

from bot.config import ChannelSection


class LocalConfig(ChannelSection):
    enabled: bool = True
    # Required (as ?token= or a Bearer header) when the server listens beyond loopback;
    # without it the web chat stays off there, since its sessions see private memory.
    token: str = ""

    def secrets(self) -> list[str]:
        return [self.token]
