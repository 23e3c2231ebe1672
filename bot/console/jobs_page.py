"""The Jobs page: every scheduled job (where it posts, who set it up, its schedule in words,
its next run, its last outcome, what its runs cost), with pause, resume and cancel, which
go through the same code as `krill schedules`, as the operator."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Literal, Protocol

from aiohttp import web

from bot.console.layout import esc, money, notice, page, url, when
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
        rows = "".join(self._row(job) for job in jobs)
        table = (
            '<div class="table-wrap"><table><thead><tr><th>Job</th><th>Where</th>'
            "<th>Schedule</th><th>Next run</th><th>Last run</th><th>Cost</th><th></th></tr>"
            f"</thead><tbody>{rows}</tbody></table></div>"
            if jobs
            else "<p>No scheduled jobs. People set them up in chat (“every weekday at 9:00, "
            "…”).</p>"
        )
        return page("Jobs", (notice(said) if said else "") + table, active="jobs")

    def _row(self, job: ScheduledJob) -> str:
        paused = job.state == JobState.PAUSED
        next_run = (
            f"paused{': ' + esc(job.paused_reason) if job.paused_reason else ''}"
            if paused
            else esc(when(job.next_run_at, self.zone))
        )
        last = (
            f"{esc(when(job.last_run_at, self.zone))}: {esc(job.last_outcome)}"
            if job.last_outcome
            else "—"
        )
        per_run = f" ({money(job.cost_usd / job.runs)} a run)" if job.runs else ""
        return (
            f'<tr data-testid="job-row" data-job="{job.id}"><td><b>#{job.id} {esc(job.name)}</b>'
            f"<br><small>{esc(job.task)}</small></td>"
            f"<td>{esc(job.session_key)}<br><small>set up by {esc(job.creator)}</small></td>"
            f"<td>{esc(Recurrence(job.cron, job.timezone).describe())}</td>"
            f'<td class="{"bad" if paused else ""}">{next_run}</td><td>{last}</td>'
            f"<td>{money(job.cost_usd)} over {job.runs} run(s){per_run}</td>"
            f"<td>{self._buttons(job, ('resume', 'cancel') if paused else ('pause', 'cancel'))}"
            "</td></tr>"
        )

    def _buttons(self, job: ScheduledJob, actions: Iterable[Action]) -> str:
        return "".join(
            '<form method="post" action="/admin/jobs" class="inline">'
            f'<input type="hidden" name="id" value="{job.id}">'
            f'<button name="action" value="{action}" data-testid="job-{action}"'
            f"{' class=secondary' if action == 'cancel' else ''}>{action.title()}</button></form>"
            for action in actions
        )

    async def change(self, request: web.Request) -> web.Response:
        form = await request.post()
        raw, action = str(form.get("id", "")), str(form.get("action", ""))
        if not raw.isdigit() or action not in ACTIONS:
            raise web.HTTPBadRequest(text="id must be a job's number and action one of "
                                     "pause, resume, cancel")  # fmt: skip
        try:
            job = await self.control.operate(int(raw), action)
        except ValueError as exc:
            said = str(exc)
        else:
            said = f"#{job.id} {job.name}: {job.state}"
        raise web.HTTPSeeOther(url("/admin/jobs", said=said))
