"""The button under a scheduled job's run: pause the job, for the person who set it up or an
admin, through the same check and change as /jobs and schedule_pause. There is no snooze: the
job comes back by itself at its next run."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.buttons.choices import ChoiceSpec, Outcome, presser
from bot.scheduler.schedules import Actor, ScheduleRefused
from bot.sessions.access import is_admin
from bot.store.choices import Choice, ChoiceKind, ChoiceOption

if TYPE_CHECKING:
    from bot.scheduler.schedules import Schedules
    from bot.store.schedules import ScheduledJob

PAUSE = "pause"
OPTIONS = (ChoiceOption("⏸ Pause job", PAUSE),)
PAUSED_LINE = "⏸ Job #{id} paused by {who}; ask me to resume it, /jobs lists this chat's jobs."


def job_choice(job: ScheduledJob, text: str) -> ChoiceSpec:
    return ChoiceSpec(
        kind=ChoiceKind.JOB,
        text=text,
        options=OPTIONS,
        owner=job.creator,
        owner_name=job.creator_name,
        payload={"job": job.id},
        fallback=text,  # without buttons, a run is just its message
    )


class JobChoice:
    """The `ChoiceAction` of scheduled jobs' runs."""

    def __init__(self, schedules: Schedules) -> None:
        self.schedules = schedules

    async def act(self, choice: Choice) -> Outcome:
        if choice.pressed_option is None:
            return Outcome("")  # unanswered: the run's message just loses its button
        job_id = int(choice.payload["job"])
        actor = Actor(
            principal=choice.pressed_by,
            admin=is_admin(choice.pressed_by, self.schedules.config.admin),
            address=choice.address,
            name=presser(choice),
        )
        try:
            await self.schedules.change(actor, job_id, "pause")
        except ScheduleRefused as exc:
            return Outcome(f"⚠️ Not paused: {exc}.")
        return Outcome(PAUSED_LINE.format(id=job_id, who=presser(choice)))
