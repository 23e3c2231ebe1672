"""The scheduled-job tools the model gets: schedule_create, schedule_list, schedule_pause,
schedule_resume and schedule_cancel.

A job belongs to the conversation it was set up in (it posts to that chat, thread or topic)
and to the person who set it up. schedule_create answers with the schedule as it was read
and the next three run times, so a misread is seen at once. A job's task is a person's
words, so every result quotes it inside untrusted markers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bot.scheduler.schedules import Action, Actor, ScheduleRefused, same_conversation
from bot.tools.registry import (
    Tool,
    ToolContext,
    ToolError,
    ToolHandler,
    ToolRegistry,
    positive_int_arg,
)
from bot.untrusted import clean_name, marker_id_for, sanitize, wrap_untrusted

if TYPE_CHECKING:
    from bot.scheduler.schedules import Schedules
    from bot.store.schedules import ScheduledJob
    from bot.store.sessions import SessionStore

TASK_MAX_CHARS = 2_000
NAME_MAX_CHARS = 60

CREATE_DESCRIPTION = (
    "Set up a recurring job in this conversation: at every time `when` names, you get "
    "`task` back here and do it (with your tools), and what you write is posted to this "
    "same chat, thread or topic. `when` is plain English ('every weekday at 9:00', 'every "
    "2 hours', 'every Monday and Thursday at 18:30', 'on the first Monday of each month at "
    "10:00', 'every day at 18:30 Berlin time') or a five-field cron expression ('0 9 * * "
    "1-5'), in {tz} unless a zone or city is named. Tell the person the schedule and the "
    "next runs from the result, so they can correct a misreading. For a one-off, use "
    "reminder_create instead."
)
LIST_DESCRIPTION = (
    "List the scheduled jobs of this conversation with their ids, schedules, next runs, "
    "last outcomes and costs. all=true (admins, in their direct messages only) lists every "
    "job everywhere."
)
ALL_ADMINS_ONLY = (
    "only an admin's direct messages may list every job; without all, schedule_list shows "
    "this conversation's jobs"
)
ID_SCHEMA = {
    "type": "object",
    "properties": {"id": {"type": "integer", "minimum": 1}},
    "required": ["id"],
}


class ScheduleTools:
    def __init__(self, schedules: Schedules, sessions: SessionStore) -> None:
        self.schedules = schedules
        self.sessions = sessions  # where an internal turn's conversation is

    def register(self, registry: ToolRegistry) -> None:
        tz = self.schedules.timezone
        registry.register(
            Tool(
                "schedule_create",
                CREATE_DESCRIPTION.format(tz=tz),
                {
                    "type": "object",
                    "properties": {
                        "when": {"type": "string", "description": "how often, or cron"},
                        "task": {"type": "string", "description": "what to do at each run"},
                        "name": {"type": "string", "description": "a short name for it"},
                    },
                    "required": ["when", "task"],
                },
                self.create,
            )
        )
        registry.register(
            Tool(
                "schedule_list",
                LIST_DESCRIPTION,
                {
                    "type": "object",
                    "properties": {
                        "all": {"type": "boolean", "description": "admins' DMs: every job"}
                    },
                },
                self.list,
            )
        )
        actions: tuple[tuple[Action, str], ...] = (
            ("pause", "Pause one of this conversation's scheduled jobs by its id."),
            ("resume", "Resume a paused scheduled job of this conversation by its id."),
            ("cancel", "Cancel (delete) one of this conversation's scheduled jobs by its id."),
        )
        for action, what in actions:
            registry.register(Tool(f"schedule_{action}", what, ID_SCHEMA, self._changer(action)))

    async def _actor(self, ctx: ToolContext) -> Actor:
        address = ctx.address
        if address is None:  # an internal turn: the session's own conversation
            session = await self.sessions.get_session(ctx.session_id)
            address = session.address if session is not None else None
        return Actor(
            principal=ctx.principal,
            admin=ctx.admin,
            address=address,
            direct=ctx.is_direct,
            name=ctx.principal_name,
        )

    def _quoted(self, job: ScheduledJob, ctx: ToolContext) -> str:
        marker = marker_id_for(f"{ctx.turn_id}:job:{job.id}")
        return wrap_untrusted(job.task, source="scheduled-job", marker_id=marker)

    async def create(self, args: dict[str, Any], ctx: ToolContext) -> str:
        when, task, name = args.get("when"), args.get("task"), args.get("name") or ""
        if not isinstance(when, str) or not isinstance(task, str) or not task.strip():
            raise ToolError("when and task must both be non-empty strings")
        if not isinstance(name, str):
            raise ToolError("name must be a string")
        if len(task) > TASK_MAX_CHARS:
            raise ToolError(f"task is longer than {TASK_MAX_CHARS} characters; shorten it")
        task = task.strip()
        name = clean_name(name.strip() or task)[:NAME_MAX_CHARS]
        try:
            job = await self.schedules.create(
                await self._actor(ctx),
                session_key=ctx.session_key,
                when=when,
                task=task,
                name=name,
            )
        except ScheduleRefused as exc:
            raise ToolError(sanitize(str(exc))) from None
        runs = "; ".join(self.schedules.next_runs(job))
        return (
            f"Scheduled job #{job.id} “{job.name}” set up: {self.schedules.describe(job)}.\n"
            f"Next runs: {runs}.\n"
            f"It posts here each time, doing this task:\n{self._quoted(job, ctx)}"
        )

    async def list(self, args: dict[str, Any], ctx: ToolContext) -> str:
        everywhere = args.get("all") is True
        if everywhere and not (ctx.admin and ctx.is_direct):
            raise ToolError(ALL_ADMINS_ONLY)
        actor = await self._actor(ctx)
        jobs = await self.schedules.visible(actor, everywhere=everywhere)
        if not jobs:
            return "No scheduled jobs." if everywhere else "No scheduled jobs in this conversation."
        blocks = []
        for job in jobs:
            text = self.schedules.summary(job)
            if everywhere:
                text += f"\n  set up by {clean_name(job.creator)} in {clean_name(job.session_key)}"
            blocks.append(f"{text}\n{self._quoted(job, ctx)}")
        return "\n".join(blocks)

    def _changer(self, action: Action) -> ToolHandler:
        async def change(args: dict[str, Any], ctx: ToolContext) -> str:
            job_id = positive_int_arg(args, "id", 0)
            actor = await self._actor(ctx)
            try:
                job = await self.schedules.change(actor, job_id, action)
            except ScheduleRefused as exc:
                raise ToolError(sanitize(str(exc))) from None
            done = {"pause": "Paused", "resume": "Resumed", "cancel": "Cancelled"}[action]
            if not (same_conversation(job, actor.address) or (ctx.admin and ctx.is_direct)):
                # An admin changing another chat's job from a group: its name stays private.
                return f"{done}: #{job.id} (a job of another conversation)"
            if action == "resume":
                return f"{done}: {self.schedules.summary(job)}"
            return f"{done}: #{job.id} “{job.name}”"

        return change
