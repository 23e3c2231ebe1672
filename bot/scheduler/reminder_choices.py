"""The buttons of a reminder that fired: snooze it 10 minutes, an hour or until tomorrow (the
same time of day it was due, in agent.timezone), or mark it done. For the person who set
it, or an admin."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from bot.buttons.choices import TIMED_OUT_LINE, ChoiceSpec, Outcome, presser
from bot.scheduler.when import describe_time
from bot.store.choices import Choice, ChoiceKind, ChoiceOption
from bot.types import ButtonStyle

if TYPE_CHECKING:
    from bot.scheduler.reminders import Reminders
    from bot.store.base import Reminder

DONE, TOMORROW = "done", "tomorrow"
OPTIONS = (
    ChoiceOption("⏰ 10 min", "600"),
    ChoiceOption("⏰ 1 hour", "3600"),
    ChoiceOption("⏰ Tomorrow", TOMORROW),
    ChoiceOption("✅ Done", DONE, ButtonStyle.PRIMARY),
)


def reminder_choice(reminder: Reminder, text: str) -> ChoiceSpec:
    return ChoiceSpec(
        kind=ChoiceKind.REMINDER,
        text=text,
        options=OPTIONS,
        owner=reminder.creator,
        payload={"reminder": reminder.id, "due_at": reminder.due_at},
        columns=2,
        fallback=text,  # without buttons, a reminder is just its message
    )


def snooze_until(value: str, pressed_at: float, due_at: float, timezone: str) -> float:
    """When a snoozed reminder is due again: `value` seconds after the press, or for
    "tomorrow" the next day's same local time as it was due, after the press."""
    if value != TOMORROW:
        return pressed_at + float(value)
    zone = ZoneInfo(timezone)
    due = dt.datetime.fromtimestamp(due_at, zone)
    day = dt.datetime.fromtimestamp(pressed_at, zone).date() + dt.timedelta(days=1)
    # The wall-clock time on that date, so a DST change in between does not shift it.
    return dt.datetime.combine(day, due.time(), zone).timestamp()


class ReminderChoice:
    """The `ChoiceAction` of reminders that fired."""

    def __init__(self, reminders: Reminders) -> None:
        self.reminders = reminders

    async def act(self, choice: Choice) -> Outcome:
        option = choice.pressed_option
        if option is None:
            return Outcome(TIMED_OUT_LINE)
        if option.value == DONE:
            return Outcome(f"✅ Done ({presser(choice)}).")
        pressed_at = choice.pressed_at or choice.created_at
        due = snooze_until(
            option.value, pressed_at, choice.payload["due_at"], self.reminders.timezone
        )
        await self.reminders.snooze(int(choice.payload["reminder"]), due)
        until = describe_time(due, self.reminders.timezone)
        return Outcome(f"⏰ Snoozed by {presser(choice)} until {until}.")
