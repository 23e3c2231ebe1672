"""The reminder tools the model gets: reminder_create, reminder_list and reminder_cancel.

A reminder belongs to the person who asked for it (the turn's principal) and to the
conversation it was set in: it fires in that session and replies to that chat, thread or
topic. People list and cancel only their own, of the conversation they are in (a DM's
reminders never show in a group); an admin may cancel anyone's, and in their own direct
messages list everyone's. What a person asked to be reminded of is their words, so
every result quotes it inside untrusted markers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bot.scheduler.reminders import ReminderLimit
from bot.scheduler.when import WhenError
from bot.tools.registry import Tool, ToolContext, ToolError, ToolRegistry, positive_int_arg
from bot.types import Address
from bot.untrusted import clean_name, marker_id_for, sanitize, wrap_untrusted

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
LIST_DESCRIPTION = (
    "List the pending reminders the person asking set in this conversation, with ids and "
    "due times. all=true (admins, in their direct messages only) lists everyone's, everywhere."
)
ALL_ADMINS_ONLY = (
    "only an admin's direct messages may list every reminder; without all, reminder_list "
    "shows the asking person's reminders of this conversation"
)
CANCEL_DESCRIPTION = (
    "Cancel one of the asking person's pending reminders of this conversation by its id."
)


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
                {
                    "type": "object",
                    "properties": {
                        "all": {"type": "boolean", "description": "admins' DMs: everyone's"}
                    },
                },
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

    def _line(self, reminder: Reminder, ctx: ToolContext, *, whose: bool = False) -> str:
        """One reminder: id, due time (and with `whose`, who set it where), then its text,
        quoted as the person's words."""
        head = f"#{reminder.id} · {self.reminders.when(reminder)}"
        if whose:
            where = clean_name(reminder.session_key)
            head += f" · set by {clean_name(reminder.creator)} in {where}"
        marker = marker_id_for(f"{ctx.turn_id}:reminder:{reminder.id}")
        return f"{head}\n{wrap_untrusted(reminder.text, source='reminder', marker_id=marker)}"

    async def _address(self, ctx: ToolContext) -> Address | None:
        """Where the turn is: its reply address, else (an internal turn) the session's."""
        return ctx.address or await self.reminders.address_of(ctx.session_id)

    async def create(self, args: dict[str, Any], ctx: ToolContext) -> str:
        when, text = args.get("when"), args.get("text")
        if not isinstance(when, str) or not isinstance(text, str) or not text.strip():
            raise ToolError("when and text must both be non-empty strings")
        if len(text) > MAX_TEXT_CHARS:
            raise ToolError(f"text is longer than {MAX_TEXT_CHARS} characters; shorten it")
        address = await self._address(ctx)
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
            raise ToolError(sanitize(str(exc))) from None
        return f"Reminder set: {self._line(reminder, ctx)}"

    async def pending(self, args: dict[str, Any], ctx: ToolContext) -> str:
        if args.get("all") is True:
            if not (ctx.admin and ctx.is_direct):
                raise ToolError(ALL_ADMINS_ONLY)
            everyone = await self.reminders.pending_of(None)
            if not everyone:
                return "No pending reminders."
            return "\n".join(self._line(r, ctx, whose=True) for r in everyone)
        address = await self._address(ctx)
        mine = await self.reminders.pending_of(ctx.principal)
        here = [r for r in mine if address is not None and same_chat(r, address)]
        if not here:
            return "No pending reminders in this conversation."
        return "\n".join(self._line(r, ctx) for r in here)

    async def cancel(self, args: dict[str, Any], ctx: ToolContext) -> str:
        reminder_id = positive_int_arg(args, "id", 0)
        address = await self._address(ctx)

        def here(reminder: Reminder) -> bool:
            return address is not None and same_chat(reminder, address)

        def allowed(reminder: Reminder) -> bool:
            return ctx.admin or (reminder.creator == ctx.principal and here(reminder))

        cancelled = await self.reminders.cancel(reminder_id, allowed)
        if cancelled is None:
            raise ToolError(
                f"no pending reminder #{reminder_id} of yours in this conversation; see "
                "reminder_list"
            )
        if here(cancelled) or (ctx.admin and ctx.is_direct):
            return f"Cancelled: {self._line(cancelled, ctx)}"
        # An admin cancelling another chat's reminder from a group: its text stays private.
        return f"Cancelled: #{cancelled.id} (set in another conversation)"


def same_chat(reminder: Reminder, address: Address) -> bool:
    """Whether `reminder` fires in the chat, thread or topic `address` is in."""
    target = reminder.address
    return (target.channel, target.chat_id, target.thread_id) == (
        address.channel,
        address.chat_id,
        address.thread_id,
    )
