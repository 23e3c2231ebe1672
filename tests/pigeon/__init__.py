"""Pigeon: a throwaway channel that exists only in the tests, to show that a channel is its
package plus its entry in a registry list. People post JSON to `/pigeon/messages` with the
loft's token; replies are kept in the adapter and listed at `/pigeon/replies`. Nothing under
bot/ names it: `python -m tests.pigeon` is `krill` with SPEC appended to the registry list,
and the config tests hand `(*CHANNELS, SPEC)` to the loader."""

from __future__ import annotations

from bot.channel_contract import ChannelSpec, ChannelStatus, Gateway, LeaderLookup
from bot.config import Config
from tests.pigeon.adapter import PigeonChannel
from tests.pigeon.config import PigeonConfig


def create(pigeon: PigeonConfig, config: Config, gateway: Gateway) -> PigeonChannel:
    return PigeonChannel(pigeon, gateway)


async def status(pigeon: PigeonConfig, leader: LeaderLookup) -> ChannelStatus | None:
    if not pigeon.enabled:
        return None
    return ChannelStatus(f"pigeon: loft {pigeon.loft}", {"loft": pigeon.loft})


SPEC = ChannelSpec(
    name="pigeon",
    config=PigeonConfig,
    create=create,
    status=status,
    needs_server=True,
    background=False,
)
