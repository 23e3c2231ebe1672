"""The reminder tools the model gets: reminder_create, reminder_list and reminder_cancel.

A reminder belongs to the person who asked for it (the turn's principal) and to the
conversation it was set in: it fires in that session and replies to that chat, thread or
topic. People list and cancel only their own; an admin may cancel anyone's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bot.scheduler.reminders import ReminderLimit
from bot.scheduler.when import WhenError
from bot.tools.registry import Tool, ToolContext, ToolError, ToolRegistry, positive_int_arg

if TYPE_CHECKING:
    from bot.scheduler.reminders import Reminders
    from bot.store.base import Reminder

MAX_TEXT_CHARS = 2_000

CREATE_DESCRIPTION = (
    "Set a reminder for the person asking: at the given time you get the text back in this "
    "same conversation (chat, thread or topic) and write the reminder message then. `when` "
    "is ISO 8601 (2026-03-14T09:00, local time {tz} unless an offset is given) or English "
    "like 'in 10 minutes', 'tomorrow 9:00', 'next monday 8am' (in {tz}). At least 10 "
    "seconds and at most a year ahead."
)
LIST_DESCRIPTION = "List the pending reminders of the person asking, with ids and due times."
CANCEL_DESCRIPTION = "Cancel one of the asking person's pending reminders by its id."


class ReminderTools:
    def __init__(self, reminders: Reminders) -> None:
        self.reminders = reminders

    def register(self, registry: ToolRegistry) -> None:
        tz = self.reminders.timezone
        registry.register(
            Tool(
                "reminder_create",
                CREATE_DESCRIPTION.format(tz=tz),
                {
                    "type": "object",
                    "properties": {
                        "when": {"type": "string", "description": "when it is due"},
                        "text": {"type": "string", "description": "what to remind about"},
                    },
                    "required": ["when", "text"],
                },
                self.create,
            )
        )
        registry.register(
            Tool(
                "reminder_list",
                LIST_DESCRIPTION,
                {"type": "object", "properties": {}},
                self.pending,
            )
        )
        registry.register(
            Tool(
                "reminder_cancel",
                CANCEL_DESCRIPTION,
                {
                    "type": "object",
                    "properties": {"id": {"type": "integer", "minimum": 1}},
                    "required": ["id"],
                },
                self.cancel,
            )
        )

    def _line(self, reminder: Reminder) -> str:
        return f"#{reminder.id} · {self.reminders.when(reminder)} · {reminder.text}"

    async def create(self, args: dict[str, Any], ctx: ToolContext) -> str:
        when, text = args.get("when"), args.get("text")
        if not isinstance(when, str) or not isinstance(text, str) or not text.strip():
            raise ToolError("when and text must both be non-empty strings")
        if len(text) > MAX_TEXT_CHARS:
            raise ToolError(f"text is longer than {MAX_TEXT_CHARS} characters; shorten it")
        address = await self.reminders.address_of(ctx.session_id)
        if address is None:
            raise ToolError("this conversation has no address to send a reminder to yet")
        try:
            reminder = await self.reminders.create(
                session_key=ctx.session_key,
                address=address,
                creator=ctx.principal,
                when=when,
                text=text.strip(),
            )
        except (WhenError, ReminderLimit) as exc:
            raise ToolError(str(exc)) from None
        return f"Reminder set: {self._line(reminder)}"

    async def pending(self, args: dict[str, Any], ctx: ToolContext) -> str:
        pending = await self.reminders.pending_of(ctx.principal)
        if not pending:
            return "No pending reminders."
        return "\n".join(self._line(r) for r in pending)

    async def cancel(self, args: dict[str, Any], ctx: ToolContext) -> str:
        reminder_id = positive_int_arg(args, "id", 0)
        cancelled = await self.reminders.cancel(reminder_id, creator=ctx.principal, admin=ctx.admin)
        if cancelled is None:
            raise ToolError(f"no pending reminder #{reminder_id} of yours; see reminder_list")
        return f"Cancelled: {self._line(cancelled)}"
