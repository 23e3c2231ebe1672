"""The Jobs page: every scheduled job (where it posts, who set it up, its schedule in words,
its next run, its last outcome, what its runs cost), with pause, resume and cancel, which
go through the same code as `krill schedules`, as the operator."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Literal, Protocol

from aiohttp import web
from markupsafe import Markup

from bot.console.layout import join, money, notice, page, url, when
from bot.recurrence import Recurrence
from bot.store.schedules import JobState, ScheduledJob, ScheduleStore

if TYPE_CHECKING:
    from collections.abc import Iterable

Action = Literal["pause", "resume", "cancel"]
ACTIONS: tuple[Action, ...] = ("pause", "resume", "cancel")


class JobControl(Protocol):
    async def operate(self, job_id: int, action: Action) -> ScheduledJob:
        """Change a job as the operator; a ValueError says why it could not be."""
        ...


class JobsPage:
    def __init__(self, *, store: ScheduleStore, control: JobControl, zone: dt.tzinfo) -> None:
        self.store = store
        self.control = control
        self.zone = zone

    def routes(self) -> list[web.RouteDef]:
        return [web.get("/admin/jobs", self.jobs_page), web.post("/admin/jobs", self.change)]

    async def jobs_page(self, request: web.Request) -> web.Response:
        jobs = await self.store.schedules()
        said = request.query.get("said", "")
        table = (
            Markup(
                '<div class="table-wrap"><table><thead><tr><th>Job</th><th>Schedule</th>'
                "<th>Next run</th><th>Last run</th><th>Cost</th><th>Where</th><th></th>"
                "</tr></thead><tbody>{}</tbody></table></div>"
            ).format(join(self._row(job) for job in jobs))
            if jobs
            else Markup(
                "<p>No scheduled jobs. People set them up in chat (“every weekday at 9:00, …”).</p>"
            )
        )
        return page("Jobs", (notice(said) if said else Markup("")) + table, active="jobs")

    def _row(self, job: ScheduledJob) -> Markup:
        paused = job.state == JobState.PAUSED
        if paused:
            next_run = "paused: " + job.paused_reason if job.paused_reason else "paused"
        else:
            next_run = when(job.next_run_at, self.zone)
        last = (
            f"{when(job.last_run_at, self.zone)}: {job.last_outcome}" if job.last_outcome else "—"
        )
        per_run = f" ({money(job.cost_usd / job.runs)} a run)" if job.runs else ""
        # What a person reads first comes first, so a phone shows it; the key wraps.
        return Markup(
            '<tr data-testid="job-row" data-job="{id}"><td><b>#{id} {name}</b><br>'
            '<small>{task}</small></td><td>{schedule}</td><td class="{css}">{next}</td>'
            "<td>{last}</td><td>{cost} over {runs} run(s){per_run}</td>"
            '<td><span class="key">{key}</span><br><small>set up by {creator}</small></td>'
            "<td>{buttons}</td></tr>"
        ).format(
            id=job.id,
            name=job.name,
            task=job.task,
            key=job.session_key,
            creator=job.creator,
            schedule=Recurrence(job.cron, job.timezone).describe(),
            css="bad" if paused else "",
            next=next_run,
            last=last,
            cost=money(job.cost_usd),
            runs=job.runs,
            per_run=per_run,
            buttons=self._buttons(job, ("resume", "cancel") if paused else ("pause", "cancel")),
        )

    def _buttons(self, job: ScheduledJob, actions: Iterable[Action]) -> Markup:
        return join(
            Markup(
                '<form method="post" action="/admin/jobs" class="inline">'
                '<input type="hidden" name="id" value="{}">'
                '<button name="action" value="{}" data-testid="job-{}"{}>{}</button></form>'
            ).format(
                job.id,
                action,
                action,
                Markup(" class=secondary") if action == "cancel" else "",
                action.title(),
            )
            for action in actions
        )

    async def change(self, request: web.Request) -> web.Response:
        form = await request.post()
        raw, action = str(form.get("id", "")), str(form.get("action", ""))
        if not raw.isdigit() or action not in ACTIONS:
            raise web.HTTPBadRequest(
                text="id must be a job's number and action one of pause, resume, cancel"
            )
        try:
            job = await self.control.operate(int(raw), action)
        except ValueError as exc:
            said = str(exc)
        else:
            said = f"#{job.id} {job.name}: {job.state}"
        raise web.HTTPSeeOther(url("/admin/jobs", said=said))
