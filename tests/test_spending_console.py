"""The console's costs page against the real `krill run`: today's calls in the chart by kind,
the people and chats that spent them, the bot's sums against its caps, and each session's
split by kind on its own page; the figures are the ledger's, as `krill costs` prints them."""

from __future__ import annotations

import json
from pathlib import Path

import aiohttp

from tests.fakes.anthropic import FakeAnthropic
from tests.krill_process import KrillProcess, run_cli
from tests.test_e2e_local import model_env, plain_echo

TOKEN = "console-Token_4711-long-enough"
BEARER = {"Authorization": f"Bearer {TOKEN}"}


async def test_the_costs_page_shows_the_ledger_by_kind_person_and_chat(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.default_handler = plain_echo
    config = {"admin": {"console_token": TOKEN}, "budgets": {"daily_usd": 50.0}}
    async with KrillProcess(tmp_path, config, model_env(fake_anthropic)) as krill:
        await krill.chat("hello from alice", user="alice")
        await krill.chat("hello from bob", user="bob")
        async with aiohttp.ClientSession(headers=BEARER) as http:
            async with http.get(f"{krill.url}/admin/costs") as resp:
                assert resp.status == 200
                costs = await resp.text()
            session = f"{krill.url}/admin/session?key=agent:main:local:direct:alice"
            async with http.get(session) as resp:
                assert resp.status == 200
                alice = await resp.text()
    code, out, err = await run_cli(
        tmp_path, "costs", "--by", "person", "--json", "--config", "krill.toml"
    )
    assert code == 0, err
    people = {row["key"] for row in json.loads(out)}
    assert people == {"local:alice", "local:bob"}
    assert 'data-testid="cost-chart"' in costs and "<rect" in costs
    assert costs.count('data-testid="cost-row"') == 1 + 2 + 2  # kinds, people, chats
    assert "local:alice" in costs and "local:bob" in costs
    assert "of its daily cap of $50.00" in costs
    assert 'data-testid="session-costs"' in alice and "turn" in alice
