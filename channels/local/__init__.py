"""The local channel: a terminal chat (`krill chat`) and a small web chat served at `/`.
`SPEC` (the web chat) is its entry in `channels.registry`; `krill chat` adds the terminal."""

from __future__ import annotations

import logging

from bot.channel_contract import ChannelSpec, Gateway
from bot.config import Config
from channels.local.config import LocalConfig
from channels.local.terminal import TerminalChannel
from channels.local.web import WebChannel, is_loopback_host

log = logging.getLogger(__name__)

__all__ = ["SPEC", "TerminalChannel", "WebChannel"]


def create(local: LocalConfig, config: Config, gateway: Gateway) -> WebChannel | None:
    """The web chat, unless the server is reachable from the network without a token: its
    sessions are DMs that see private memory."""
    token = local.token
    if token or is_loopback_host(config.server.host):
        return WebChannel(gateway, token=token, trusted_proxies=config.server.trusted_proxies)
    log.warning(
        "the local web chat is off: server.host %s is reachable from the network "
        "and local.token is not set",
        config.server.host,
    )
    return None


SPEC = ChannelSpec(
    name="local",
    config=LocalConfig,
    create=create,
    needs_server=True,
    background=False,
)
