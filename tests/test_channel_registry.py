"""A channel is its package and its registry entry. The throwaway channel in tests/pigeon/
(config section, secret variable, consistency check, `krill status` line, pairing, an
adapter with routes on the shared server) is added to the registry list alone
(`python -m tests.pigeon` is `krill` with one more entry in that list), and a message
posted to it is answered by the real `krill run` and the fake model; nothing under bot/
names it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot.config import load_config
from bot.errors import ConfigError
from channels.registry import CHANNELS
from tests import pigeon
from tests.fakes.anthropic import FakeAnthropic
from tests.krill_process import KrillProcess, run_cli, write_config
from tests.pigeon.config import PigeonConfig
from tests.test_e2e_local import model_env, plain_echo

REGISTRY = (*CHANNELS, pigeon.SPEC)
LAUNCHER = "tests.pigeon"
ROOT = Path(__file__).resolve().parent.parent
TOKEN = "coo-Coo_4711"
BEARER = {"Authorization": f"Bearer {TOKEN}"}


async def replies(http: aiohttp.ClientSession, url: str) -> list[dict[str, Any]]:
    """The pigeon's delivered replies, once there is one."""
    deadline = asyncio.get_running_loop().time() + 30
    while True:
        async with http.get(f"{url}/pigeon/replies", headers=BEARER) as resp:
            assert resp.status == 200, await resp.text()
            found: list[dict[str, Any]] = await resp.json()
        if found or asyncio.get_running_loop().time() > deadline:
            return found
        await asyncio.sleep(0.1)


async def test_a_channel_added_through_the_registry_alone_answers_a_message(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.default_handler = plain_echo
    config = {
        "anthropic": {"max_retries": 0},
        "pigeon": {"enabled": True, "loft": "harbour", "dm_policy": "open"},
    }
    # The token comes from the pigeon's own conventional variable.
    env = model_env(fake_anthropic) | {"PIGEON_TOKEN": TOKEN, "PYTHONPATH": str(ROOT)}
    async with (
        KrillProcess(tmp_path, config, env, module=LAUNCHER) as krill,
        aiohttp.ClientSession() as http,
    ):
        message = {"user": "ada", "text": "how far is the loft?"}
        async with http.post(f"{krill.url}/pigeon/messages", json=message, headers=BEARER) as resp:
            assert resp.status == 200 and (await resp.json())["result"] == "accepted"
        answered = await replies(http, krill.url)
        _, health = await krill.get("/healthz")
        config_arg = ("--config", str(krill.config_path))
        status = await run_cli(tmp_path, "status", "--json", *config_arg, env=env, module=LAUNCHER)
        pairing = await run_cli(
            tmp_path, "pairing", "list", "pigeon", *config_arg, env=env, module=LAUNCHER
        )
    assert answered == [{"to": "ada", "text": "echo: how far is the loft?"}]
    assert json.loads(health)["channels"]["pigeon"] is True
    code, out, err = status
    assert code == 0, err
    shown = json.loads(out)
    assert shown["pigeon"] == {"loft": "harbour"}
    (session,) = [s for s in shown["sessions"] if s["channel"] == "pigeon"]
    assert (session["session_key"], session["turns"]) == ("agent:main:pigeon:direct:ada", 1)
    assert pairing[0] == 0, pairing[2]


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
    # Its token is one the logs redact; its DM policy may be "pairing".
    assert TOKEN in overridden.secrets() and "pigeon" in overridden.pairing_channels()


def test_the_throwaway_channel_imports_only_what_a_channel_package_may() -> None:
    from tests.test_layering import CHANNEL_SIDE, imports_of, within

    folder = Path(pigeon.__file__).parent
    core = {
        imp.module
        for path in folder.glob("*.py")
        if path.name != "__main__.py"  # the launcher stands in for the `krill` entry point
        for imp in imports_of(path)
        if within(imp.module, "bot")
    }
    assert core and all(any(within(m, allowed) for allowed in CHANNEL_SIDE) for m in core)
