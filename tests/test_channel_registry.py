"""A channel is its package and its registry entry. The throwaway channel in tests/pigeon/
(config section, secret variable, consistency check, `krill status` line, an adapter with a
route on the shared server) is added to the registry list alone, and a message posted to it
is answered through the real `App` and the fake model; nothing under bot/ names it."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

import aiohttp
import pytest

from bot.app import App
from bot.cli.sessions import status_command
from bot.config import load_config
from bot.errors import ConfigError
from channels.registry import CHANNELS
from tests import pigeon
from tests.fakes.anthropic import FakeAnthropic
from tests.krill_process import free_port, write_config
from tests.pigeon.adapter import PigeonChannel
from tests.pigeon.config import PigeonConfig
from tests.test_e2e_local import model_env, plain_echo

REGISTRY = (*CHANNELS, pigeon.SPEC)
TOKEN = "coo-Coo_4711"


async def test_a_channel_added_through_the_registry_alone_answers_a_message(
    tmp_path: Path, fake_anthropic: FakeAnthropic, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_anthropic.default_handler = plain_echo
    port = free_port()
    path = write_config(
        tmp_path,
        {
            "server": {"port": port},
            "anthropic": {"max_retries": 0},
            "pigeon": {"enabled": True, "loft": "harbour", "dm_policy": "open"},
        },
    )
    env = model_env(fake_anthropic) | {"PIGEON_TOKEN": TOKEN}
    config = load_config(str(path), env=env, channels=REGISTRY)
    settings = pigeon.SPEC.settings(config)
    assert (settings.loft, settings.token) == ("harbour", TOKEN)  # the file, then the variable
    assert "pigeon" in config.pairing_channels() and TOKEN in config.secrets()

    async with (
        App(config, background=True, channels=REGISTRY) as app,
        aiohttp.ClientSession() as http,
    ):
        channel = app.channels["pigeon"]
        assert isinstance(channel, PigeonChannel)
        async with http.post(
            f"http://127.0.0.1:{port}/pigeon/messages",
            json={"user": "ada", "text": "how far is the loft?"},
            headers={"Authorization": f"Bearer {TOKEN}"},
        ) as resp:
            assert resp.status == 200 and (await resp.json())["result"] == "accepted"
        await asyncio.wait_for(channel.replied.wait(), 20)
        session = await app.store.current_session("agent:main:pigeon:direct:ada")
    assert [r.text for r in channel.replies if r.final] == ["echo: how far is the loft?"]
    assert session is not None and session.turns == 1

    # `krill status` (it runs its own event loop, so in a thread of its own here).
    args = argparse.Namespace(json=True)
    assert await asyncio.to_thread(status_command, config, args, channels=REGISTRY) == 0
    assert json.loads(capsys.readouterr().out)["pigeon"] == {"loft": "harbour"}


def test_a_registered_channels_keys_and_checks_are_the_config_loaders(tmp_path: Path) -> None:
    path = write_config(tmp_path, {"pigeon": {"enabled": True, "loft": 7}})
    with pytest.raises(ConfigError) as wrong_type:
        load_config(str(path), env={}, channels=REGISTRY)
    path = write_config(tmp_path, {"pigeon": {"enabled": True}})
    with pytest.raises(ConfigError) as no_token:
        load_config(str(path), env={}, channels=REGISTRY)
    with pytest.raises(ConfigError) as unregistered:
        load_config(str(path), env={}, channels=CHANNELS)
    overridden = load_config(
        str(path), env={"KRILL_PIGEON__LOFT": "attic", "PIGEON_TOKEN": TOKEN}, channels=REGISTRY
    )
    assert "pigeon.loft: Input should be a valid string (got 7)" in str(wrong_type.value)
    assert "pigeon.token: required when pigeon.enabled (or set PIGEON_TOKEN)" in str(no_token.value)
    assert "pigeon: unknown key" in str(unregistered.value)
    assert isinstance(overridden.channel("pigeon"), PigeonConfig)
    assert pigeon.SPEC.settings(overridden).loft == "attic"


def test_the_throwaway_channel_imports_only_what_a_channel_package_may() -> None:
    from tests.test_layering import CHANNEL_SIDE, imports_of, within

    folder = Path(pigeon.__file__).parent
    core = {
        imp.module
        for path in folder.glob("*.py")
        for imp in imports_of(path)
        if within(imp.module, "bot")
    }
    assert core and all(any(within(m, allowed) for allowed in CHANNEL_SIDE) for m in core)
