"""Spending caps end to end: the real `krill run` with the fake Telegram Bot API and the fake
model, whose usage numbers price every call. A person over their daily cap is told once which
cap and when it resets, no model request is made for their further messages (across kill
-9 too), and after the clock passes midnight in `agent.timezone` they are answered again; a
group's cap stops that group only; the bot's cap stops everyone but admins, who hear that it
was reached; the warning arrives once; the costs table sums to the session counters; two
replicas on one PostgreSQL cannot together run past a cap by more than one turn.

Caps of a tenth of a cent make one turn of the fake (thousands of prompt tokens) go over.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import time
from pathlib import Path
from typing import Any

import aiohttp

from tests.channel_env import telegram_section
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.telegram import FakeTelegram
from tests.krill_process import KrillProcess, run_cli
from tests.replica_set import ReplicaSet, replica_config
from tests.test_media_restart_e2e import log_says, recorded_sent

PERSON, OTHER, ADMIN = 42, 43, 7
GROUP = -100555
TIMEOUT = 20.0
CAP = 0.001


def config(tg: FakeTelegram, budgets: dict[str, Any], offset: float = 0.0) -> dict[str, Any]:
    return {
        "anthropic": {"max_retries": 0},
        "agent": {"timezone": "UTC"},
        "telegram": telegram_section(tg, mode="polling"),
        "admin": {"users": [f"telegram:{ADMIN}"]},
        "scheduler": {"clock_offset_seconds": offset},
        "budgets": budgets,
    }


def past_midnight() -> float:
    """A clock offset that puts the service two minutes into tomorrow (UTC)."""
    now = dt.datetime.now(dt.UTC)
    midnight = dt.datetime.combine(now.date() + dt.timedelta(days=1), dt.time(), dt.UTC)
    return midnight.timestamp() - time.time() + 120


async def reply_in(tg: FakeTelegram, chat: int, needle: str, count: int = 1) -> list[str]:
    """Wait until the bot has sent `count` messages to `chat` containing `needle`."""
    found = await tg.wait_for(
        "sendMessage",
        count,
        TIMEOUT,
        lambda p: p.get("chat_id") == chat and needle in p.get("text", ""),
        successful=True,
    )
    return [str(p["text"]) for p in found]


def dm(tg: FakeTelegram, user: int, text: str) -> None:
    tg.push_update(tg.private_message(user, text, first_name=f"U{user}"))


async def test_a_person_over_their_daily_cap_is_told_once_and_answered_after_midnight(
    tmp_path: Path,
) -> None:
    budgets = {"person_daily_usd": CAP, "contact": "@ops on Telegram"}
    async with FakeTelegram() as tg, FakeAnthropic() as model:
        async with KrillProcess(tmp_path, config(tg, budgets), model.env()) as krill:
            dm(tg, PERSON, "first question")
            await reply_in(tg, PERSON, "first question")
            dm(tg, PERSON, "second question")
            [notice] = await reply_in(tg, PERSON, "spending cap")
            assert "your daily spending cap of $0.001 has been reached" in notice
            assert "resets at midnight (00:00 UTC" in notice and "@ops on Telegram" in notice
            assert len(model.message_requests) == 1
            await recorded_sent(krill, "spending cap")
            await krill.kill()
        # kill -9 and a new process: the sum and the once-a-day notice are in the store.
        async with KrillProcess(tmp_path, config(tg, budgets), model.env()) as krill:
            dm(tg, PERSON, "third question")
            await log_says(krill, f"not answering telegram:{PERSON}")
            dm(tg, PERSON, "/status")
            [status] = await reply_in(tg, PERSON, "Today:")
            assert "of $0.001 (" in status and "this session" in status
            assert len(model.message_requests) == 1
            assert len([t for t in tg.sent_texts(PERSON) if "spending cap" in t]) == 1
        # The service's clock past midnight UTC: a new day, a new sum.
        async with KrillProcess(tmp_path, config(tg, budgets, past_midnight()), model.env()):
            dm(tg, PERSON, "fourth question")
            await reply_in(tg, PERSON, "fourth question")
            assert len(model.message_requests) == 2
    code, out, err = await run_cli(tmp_path, "costs", "--json", "--config", "krill.toml")
    assert code == 0, err
    ledger = sum(row["cost_usd"] for row in json.loads(out))
    assert {row["kind"] for row in json.loads(out)} == {"turn"}
    code, out, err = await run_cli(tmp_path, "status", "--json", "--config", "krill.toml")
    assert code == 0, err
    counters = sum(s["cost_usd"] for s in json.loads(out)["sessions"])
    assert ledger > 0 and round(ledger, 2) == round(counters, 2)
    assert abs(ledger - counters) < 1e-5
    code, out, _ = await run_cli(tmp_path, "costs", "--by", "day", "--config", "krill.toml")
    assert code == 0 and out.count("turn $") == 2  # two days, one turn each


async def test_a_group_cap_stops_that_group_only_and_admins_hear_of_it(tmp_path: Path) -> None:
    budgets = {"group_daily_usd": CAP, "person_daily_usd": 100.0, "warn_at": 0.00001}
    async with FakeTelegram() as tg, FakeAnthropic() as model:
        async with KrillProcess(tmp_path, config(tg, budgets), model.env()):
            tg.push_update(tg.group_message(GROUP, PERSON, "group question", mention=True))
            await reply_in(tg, GROUP, "group question")
            # The person's own cap passed warn_at: told once, where they spoke.
            [warning] = await reply_in(tg, GROUP, "your daily spending cap of $100.00")
            assert "is used" in warning
            [reached] = await reply_in(tg, ADMIN, "is reached")
            assert f"chat telegram:{GROUP}'s daily spending cap" in reached.lower()
            tg.push_update(tg.group_message(GROUP, OTHER, "another question", mention=True))
            [notice] = await reply_in(tg, GROUP, "this chat's daily spending cap")
            assert "ask the operator of this bot" in notice
            # The same person in a direct chat is not held by the group's cap.
            dm(tg, PERSON, "private question")
            await reply_in(tg, PERSON, "private question")
            dm(tg, PERSON, "one more private question")
            await reply_in(tg, PERSON, "one more private question")
            assert len(model.message_requests) == 3
            # Once per period: the second DM turn brought no second warning.
            assert len([t for t in tg.sent_texts() if "is used" in t and "$100.00" in t]) == 1
            assert len([t for t in tg.sent_texts(ADMIN) if "is reached" in t]) == 1


async def test_the_bot_cap_stops_everyone_but_admins(tmp_path: Path) -> None:
    budgets = {"daily_usd": CAP}
    async with FakeTelegram() as tg, FakeAnthropic() as model:
        async with KrillProcess(tmp_path, config(tg, budgets), model.env()):
            dm(tg, PERSON, "first question")
            await reply_in(tg, PERSON, "first question")
            [reached] = await reply_in(tg, ADMIN, "The bot's daily spending cap")
            assert "is reached" in reached
            dm(tg, OTHER, "my question")
            [notice] = await reply_in(tg, OTHER, "the bot's daily spending cap")
            assert "resets at midnight" in notice
            dm(tg, ADMIN, "admin question")
            await reply_in(tg, ADMIN, "admin question")
            dm(tg, ADMIN, "/status")
            [status] = await reply_in(tg, ADMIN, "Today:")
            assert "Caps do not stop admins" in status
            assert len(model.message_requests) == 2


async def test_two_replicas_on_postgresql_never_both_spend_past_the_bot_cap(
    tmp_path: Path, pg_url: str
) -> None:
    async with FakeTelegram() as tg, FakeAnthropic() as model:
        model.delay = 1.0  # the two turns would overlap if nothing held the second back
        config = replica_config(tg, pg_url, budgets={"daily_usd": CAP}, agent={"timezone": "UTC"})
        replicas = await ReplicaSet(tmp_path, tg, model, config, 2).start()
        try:
            async with aiohttp.ClientSession() as http:
                # One person's message to each replica at once; the cap has room for one.
                await asyncio.gather(
                    *(
                        replicas.post_update(http, tg.private_message(chat, f"from {chat}"), i)
                        for i, chat in enumerate((PERSON, OTHER))
                    )
                )
            replies = await asyncio.gather(*(reply_in(tg, chat, "") for chat in (PERSON, OTHER)))
        finally:
            await replicas.stop()
    refused = [t for [t] in replies if "the bot's daily spending cap of $0.001 has been" in t]
    assert len(model.message_requests) == 1 and len(refused) == 1, replicas.logs()
