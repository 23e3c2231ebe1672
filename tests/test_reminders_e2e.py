"""Reminders end to end: the real `krill run` with the fake Telegram Bot API and the fake
model. A reminder set in a forum topic is a row that survives a restart, and fires into
that topic: on time when Krill restarts before it is due, and late, saying so, when the
clock has jumped past its due time while Krill was down. `scheduler.clock_offset_seconds`
starts the second process "later", so nothing waits the ten minutes for real."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from bot.scheduler.when import describe_time
from tests.channel_env import telegram_section
from tests.fakes.anthropic import FakeAnthropic, Reply
from tests.fakes.telegram import FakeTelegram
from tests.krill_process import KrillProcess, run_cli

FORUM = -100777
TOPIC = 7
PERSON = 42
TIMEOUT = 15.0
FIRED = "REMINDER FIRED"


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(str(b.get("text", "")) for b in content if b.get("type") == "text")


def model_script(body: dict[str, Any]) -> Reply | str:
    """Sets a reminder when asked, and answers a reminder prompt by quoting it."""
    last = body["messages"][-1]
    text = _text(last["content"])
    if "[Reminder:" in text:
        when = "LATE" if "was not running" in text else "ON TIME"
        return f"{FIRED} {when}: {text}"
    if any(b.get("type") == "tool_result" for b in last["content"] if isinstance(b, dict)):
        return "Done: I will remind you."
    if "remind me" in text:
        return Reply.tool_use("reminder_create", {"when": "in 10 minutes", "text": "water plants"})
    return "ok"


def config(tg: FakeTelegram, offset: float = 0.0) -> dict[str, Any]:
    return {
        "anthropic": {"max_retries": 0},
        "telegram": telegram_section(tg, mode="polling"),
        "scheduler": {"clock_offset_seconds": offset},
    }


async def topic_reply(tg: FakeTelegram, needle: str) -> dict[str, Any]:
    """The first message the bot sent into the forum whose text contains `needle`."""
    async with asyncio.timeout(TIMEOUT):
        while True:
            for message in tg.bot_messages(FORUM):
                if needle in message.get("text", ""):
                    return message
            await asyncio.sleep(0.05)


async def set_reminder(directory: Path, tg: FakeTelegram, model: FakeAnthropic) -> dict[str, Any]:
    """First process: the person asks in topic 7; the reminder is stored, then Krill stops."""
    async with KrillProcess(directory, config(tg), model.env()):
        tg.push_update(
            tg.group_message(
                FORUM, PERSON, "remind me to water the plants in 10 minutes",
                mention=True, topic_message=True, thread_id=TOPIC,
            )
        )  # fmt: skip
        await topic_reply(tg, "Done: I will remind you.")
    code, out, _ = await run_cli(directory, "reminders", "list", "--json", "--config", "krill.toml")
    assert code == 0
    [row] = json.loads(out)
    assert row["text"] == "water plants" and row["creator"] == f"telegram:{PERSON}"
    assert row["session_key"] == f"agent:main:telegram:group:{FORUM}:topic:{TOPIC}"
    return row


async def test_reminder_set_before_a_restart_fires_on_time_in_its_topic(tmp_path: Path) -> None:
    async with FakeTelegram() as tg, FakeAnthropic() as model:
        model.default_handler = model_script
        await set_reminder(tmp_path, tg, model)
        # Restarted before it was due: the clock now reads 4 s short of the due time.
        async with KrillProcess(tmp_path, config(tg, offset=600 - 4), model.env()):
            fired = await topic_reply(tg, FIRED)
    assert fired["message_thread_id"] == TOPIC
    assert f"{FIRED} ON TIME" in fired["text"] and "water plants" in fired["text"]
    code, out, _ = await run_cli(tmp_path, "reminders", "list", "--config", "krill.toml")
    assert code == 0 and "No pending reminders." in out


async def test_reminder_missed_while_down_fires_at_start_and_says_it_is_late(
    tmp_path: Path,
) -> None:
    async with FakeTelegram() as tg, FakeAnthropic() as model:
        model.default_handler = model_script
        due = (await set_reminder(tmp_path, tg, model))["due_at"]
        # The clock jumps an hour ahead while Krill is down.
        async with KrillProcess(tmp_path, config(tg, offset=3600), model.env()):
            fired = await topic_reply(tg, FIRED)
    assert fired["message_thread_id"] == TOPIC
    assert f"{FIRED} LATE" in fired["text"]
    assert "50 minute(s) late" in fired["text"]
    assert describe_time(due, "UTC") in fired["text"]  # the original time is mentioned
