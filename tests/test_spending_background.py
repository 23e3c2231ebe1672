"""Spending caps in one process (the app with a recording channel and the fake model): a
person over their cap is told once and their next messages never reach the model, /status
says where they stand, and a reminder due while they are over it still goes out, in its own
words, without asking the model."""

from __future__ import annotations

from pathlib import Path

from bot.types import Address
from tests.app_harness import Harness
from tests.fakes.anthropic import FakeAnthropic

KEY = "agent:main:local:direct:alice"
# Alice is not an admin here (admins are never capped); a tenth of a cent is one turn.
CONFIG = (
    "[admin]\nlocal_is_admin = false\n"
    '[budgets]\nperson_daily_usd = 0.001\ncontact = "the help desk"\n'
)


async def test_over_a_cap_the_person_is_told_once_and_a_reminder_skips_the_model(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    async with Harness(tmp_path, fake_anthropic.url, CONFIG) as h:
        assert h.app is not None
        await h.send("hello")
        await h.send("are you there?")
        await h.send("hello??")
        await h.send("/status")
        reminder = await h.app.reminders.create(
            session_key=KEY,
            address=Address("local", "alice"),
            creator="local:alice",
            when="in 1 hour",
            text="water the plants",
        )
        await h.app.reminders.fire(str(reminder.id))
        await h.app.sender.wait_delivered(Address("local", "alice"))
        finals = h.channel.finals
    assert len(fake_anthropic.message_requests) == 1
    notices = [f for f in finals if "spending cap" in f]
    assert len(notices) == 1 and "ask the help desk" in notices[0]
    [status] = [f for f in finals if f.startswith("Session") or "Today:" in f]
    assert "you $" in status and "of $0.001" in status
    assert finals[-1] == "⏰ Reminder: water the plants"
