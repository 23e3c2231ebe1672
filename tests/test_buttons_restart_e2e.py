"""Buttons across restarts, the real `krill run` with the fake Bot API and the fake model: a
reminder snoozed by a press fires again ten minutes later (the clock moved by
`scheduler.clock_offset_seconds`, nothing waits), and a press recorded when Krill was
killed (-9) before acting on it is acted on once after the restart. Over Slack's HTTP
interactivity, a signed press counts and a forged one is refused with 401."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.channel_env import slack_section, telegram_section
from tests.fakes.anthropic import FakeAnthropic, Reply, text_of
from tests.fakes.slack import FakeSlack, interactivity_form, post_event
from tests.fakes.telegram import FakeTelegram
from tests.krill_process import KrillProcess, run_cli
from tests.test_buttons_e2e import last_line

PERSON = 301
TIMEOUT = 15.0
FIRED = "REMINDER FIRED"
MODELS = ["claude-sonnet-4-6", "claude-haiku-4-5"]


async def until(check: Callable[[], Any], what: str) -> Any:
    async with asyncio.timeout(TIMEOUT):
        while not (found := check()):  # noqa: ASYNC110 (the fakes' state has no event)
            await asyncio.sleep(0.05)
    assert found, what
    return found


def said(body: dict[str, Any]) -> str:
    return text_of(body["messages"][-1]["content"])


def reminder_script(body: dict[str, Any]) -> Reply | str:
    text = said(body)
    if "[Reminder:" in text:
        return f"{FIRED}: water the plants"
    if "remind me" in text:
        return Reply.tool_use("reminder_create", {"when": "in 10 minutes", "text": "water plants"})
    return "Done: I will remind you."


def config(tg: FakeTelegram, offset: float = 0.0) -> dict[str, Any]:
    return {
        "anthropic": {"max_retries": 0},
        "agent": {"models": MODELS},
        "telegram": telegram_section(tg, mode="polling"),
        "scheduler": {"clock_offset_seconds": offset},
    }


def fired(tg: FakeTelegram) -> list[dict[str, Any]]:
    return [m for m in tg.bot_messages(PERSON) if FIRED in m.get("text", "")]


async def pending_reminders(directory: Path) -> list[dict[str, Any]]:
    code, out, _ = await run_cli(directory, "reminders", "list", "--json", "--config", "krill.toml")
    assert code == 0
    return list(json.loads(out))


async def test_a_snoozed_reminder_fires_again_ten_minutes_later(tmp_path: Path) -> None:
    async with FakeTelegram() as tg, FakeAnthropic() as model:
        model.default_handler = reminder_script
        async with KrillProcess(tmp_path, config(tg), model.env()):
            tg.push_update(tg.private_message(PERSON, "remind me to water the plants"))
            await until(lambda: tg.sent_texts(PERSON), "the reminder is set")
        # Started again just before it is due: it fires, with its buttons.
        async with KrillProcess(tmp_path, config(tg, offset=600 - 4), model.env()):
            await until(lambda: fired(tg), "the reminder fires")
            assert tg.buttons(PERSON) == ["⏰ 10 min", "⏰ 1 hour", "⏰ Tomorrow", "✅ Done"]
            update = tg.push_update(tg.press(PERSON, PERSON, "⏰ 10 min"))
            query = update["callback_query"]["id"]
            answer = await until(lambda: tg.callback_answers.get(query), "the press's answer")
            assert answer["text"] == "✓ ⏰ 10 min"
            await until(
                lambda: "Snoozed by Alice until" in fired(tg)[-1]["text"], "the message's edit"
            )
            assert tg.buttons(PERSON) == []
        [snoozed] = await pending_reminders(tmp_path)
        assert snoozed["text"] == "water plants"
        # Ten minutes on (the clock moved again), it fires once more.
        async with KrillProcess(tmp_path, config(tg, offset=2 * 600 - 4), model.env()):
            await until(lambda: len(fired(tg)) == 2, "the snoozed reminder fires again")
        assert await pending_reminders(tmp_path) == []
    prompts = [r for r in model.message_requests if "[Reminder:" in said(r.body)]
    assert len(prompts) == 2


async def test_a_press_in_flight_at_kill_9_is_acted_on_once_after_restart(tmp_path: Path) -> None:
    async with FakeTelegram() as tg, FakeAnthropic() as model:
        model.default_handler = lambda body: "echo: " + last_line(said(body))
        krill = await KrillProcess(tmp_path, config(tg), model.env()).start()
        try:
            tg.push_update(tg.command(PERSON, PERSON, "/model"))
            await until(lambda: tg.buttons(PERSON), "the model list")
            model.hold()  # a turn is running in the session when the press comes
            tg.push_update(tg.private_message(PERSON, "a long question"))
            await model.wait_for_requests(1)
            update = tg.push_update(tg.press(PERSON, PERSON, "claude-haiku-4-5"))
            query = update["callback_query"]["id"]
            answer = await until(lambda: tg.callback_answers.get(query), "the press's answer")
            assert answer["text"] == "✓ claude-haiku-4-5"  # recorded, waiting behind the turn
        finally:
            await krill.kill()
        assert not [c for c in tg.calls_to("editMessageText") if "switched" in c.get("text", "")]
        model.release()
        async with KrillProcess(tmp_path, config(tg), model.env()) as again:
            await until(
                lambda: any(
                    "switched to claude-haiku-4-5" in m.get("text", "")
                    for m in tg.bot_messages(PERSON)
                ),
                "the press is acted on",
            )
            await until(lambda: "echo: a long question" in tg.sent_texts(PERSON), "the turn")
            tg.push_update(tg.private_message(PERSON, "and now?"))
            await until(lambda: "echo: and now?" in tg.sent_texts(PERSON), "a new turn")
            await again.stop()
        switched = [c for c in tg.calls_to("editMessageText") if "switched" in c.get("text", "")]
        assert len(switched) == 1
        assert model.message_requests[-1].body["model"] == "claude-haiku-4-5"


async def test_slack_presses_are_signed_and_a_forged_one_is_refused(tmp_path: Path) -> None:
    async with FakeSlack() as slack, FakeAnthropic() as model:
        model.default_handler = lambda body: "echo"
        settings = {
            "anthropic": {"max_retries": 0},
            "agent": {"models": MODELS},
            "slack": slack_section(slack),
        }
        async with KrillProcess(tmp_path, settings, model.env()) as krill:
            secret = slack.signing_secret
            event = slack.im_message("U1", "/model")
            slack.record_event(event)
            status, _ = await post_event(None, f"{krill.url}/slack/events", event, secret)
            assert status == 200
            await until(lambda: slack.buttons("D1"), "the model list")
            url = f"{krill.url}/slack/interactivity"
            press = interactivity_form(slack.press("D1", "U1", "claude-haiku-4-5"))
            status, _ = await post_event(None, url, press, secret, forge=True)
            assert status == 401
            assert slack.calls_to("chat.update") == []
            status, _ = await post_event(None, url, press, secret)
            assert status == 200
            await until(lambda: slack.calls_to("chat.update"), "the message's edit")
            assert slack.buttons("D1") == []
            assert "switched to claude-haiku-4-5" in slack.message_texts("D1")[-1]
