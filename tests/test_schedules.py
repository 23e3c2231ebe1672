"""Scheduled jobs in one process, with a clock the test moves: the tools (the schedule read
back with its next runs, who may set up jobs where, the limits, each person's view), and
due runs (posted once to the job's conversation with their cost, tools without
schedule_create, failures pausing the job, missed runs caught up once or skipped, a run
repeated after a crash never posted twice), /jobs, against a real store and the fake model."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from bot.scheduler.when import describe_time
from bot.store.schedules import JobState
from bot.tools.registry import ToolContext, ToolError
from bot.types import Address, ChatType
from tests.app_harness import Harness, message
from tests.fakes.anthropic import ErrorReply, FakeAnthropic, Reply

DM_KEY = "agent:main:local:direct:alice"
# Friday 2026-03-27 12:00 UTC: the Saturday after is the last day of CET in Berlin.
START = dt.datetime(2026, 3, 27, 12, 0, tzinfo=ZoneInfo("UTC")).timestamp()


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def utc(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, ZoneInfo("UTC")).strftime("%a %Y-%m-%d %H:%M")


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))


def job_prompt(body: dict[str, Any]) -> str | None:
    """The internal prompt of a job's run, when this request is one."""
    text = text_of(body["messages"][-1]["content"])
    return text if "[Scheduled job #" in text else None


def answers_jobs(body: dict[str, Any]) -> Reply:
    prompt = job_prompt(body)
    return Reply.text(f"JOB RAN: {prompt}" if prompt else "ok")


async def call(h: Harness, name: str, args: dict[str, Any], context: ToolContext) -> str:
    assert h.app is not None
    tool = h.app.tools.get(name)
    assert tool is not None
    return str(await tool.handler(args, context))


async def dm_context(h: Harness, user: str = "alice", *, admin: bool = False) -> ToolContext:
    """A tool call from `user`'s own DM (its session exists once they said something)."""
    await h.send("hello", user=user)
    assert h.app is not None
    session = await h.app.store.current_session(f"agent:main:local:direct:{user}")
    assert session is not None
    return ToolContext(
        session_key=session.session_key,
        session_id=session.session_id,
        principal=f"local:{user}",
        principal_name=user.title(),
        is_direct=True,
        workspace=Path("."),
        admin=admin,
        address=Address("local", user),
    )


def group_context(user: str, *, chat: str = "team", admin: bool = False) -> ToolContext:
    return ToolContext(
        session_key=f"agent:main:telegram:group:{chat}",
        session_id="s-group",
        principal=f"telegram:{user}",
        is_direct=False,
        workspace=Path("."),
        admin=admin,
        address=Address("telegram", chat),
    )


async def test_create_reads_the_schedule_back_with_the_next_three_runs(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    async with Harness(tmp_path, fake_anthropic.url, clock=Clock(START)) as h:
        alice = await dm_context(h)
        said = await call(
            h,
            "schedule_create",
            {"when": "every weekday at 9:00 Berlin time", "task": "post the stand-up list"},
            alice,
        )
        [job] = await h.app.store.schedules()
    assert said.startswith("Scheduled job #1 “post the stand-up list” set up: ")
    assert "At 09:00, Monday through Friday (Europe/Berlin)" in said
    # Friday noon: Monday, Tuesday, Wednesday, all at 9:00 Berlin summer time (07:00 UTC).
    assert "Next runs: Mon 2026-03-30 09:00 CEST; Tue 2026-03-31 09:00 CEST; Wed " in said
    assert "post the stand-up list" in said.split("doing this task:")[1]
    assert (job.cron, job.timezone, job.creator) == ("0 9 * * 1-5", "Europe/Berlin", "local:alice")
    assert utc(job.next_run_at) == "Mon 2026-03-30 07:00"
    assert job.address == Address("local", "alice") and job.session_key == DM_KEY


async def test_who_may_set_up_jobs_where(tmp_path: Path, fake_anthropic: FakeAnthropic) -> None:
    toml = '[schedules]\ngroup_creators = ["telegram:7"]\n'
    async with Harness(tmp_path, fake_anthropic.url, toml, clock=Clock(START)) as h:
        args = {"when": "every day at 8:00", "task": "say good morning"}
        with pytest.raises(ToolError) as refused:
            await call(h, "schedule_create", args, group_context("6"))
        allowed = await call(h, "schedule_create", args, group_context("7"))
        admin = await call(h, "schedule_create", args, group_context("5", admin=True))
        in_dm = await call(h, "schedule_create", args, await dm_context(h, "bob"))
    message_text = str(refused.value)
    assert "only admins and the people listed in schedules.group_creators" in message_text
    assert "'telegram:6'" in message_text and "direct message" in message_text
    assert allowed.startswith("Scheduled job #1") and admin.startswith("Scheduled job #2")
    assert in_dm.startswith("Scheduled job #3")


async def test_limits_refuse_with_the_number(tmp_path: Path, fake_anthropic: FakeAnthropic) -> None:
    toml = "[schedules]\nmax_per_chat = 2\nmax_per_person = 3\nmin_interval_minutes = 30\n"
    async with Harness(tmp_path, fake_anthropic.url, toml, clock=Clock(START)) as h:
        alice = await dm_context(h)
        with pytest.raises(ToolError) as too_often:
            await call(h, "schedule_create", {"when": "*/15 * * * *", "task": "x"}, alice)
        for hour in (8, 9):
            await call(
                h, "schedule_create", {"when": f"every day at {hour}:00", "task": "x"}, alice
            )
        with pytest.raises(ToolError) as chat_full:
            await call(h, "schedule_create", {"when": "every day at 11:00", "task": "x"}, alice)
        for chat in ("team", "team", "other"):
            admin = group_context("5", chat=chat, admin=True)
            await call(h, "schedule_create", {"when": "hourly", "task": "x"}, admin)
        with pytest.raises(ToolError) as person_full:
            admin = group_context("5", chat="third", admin=True)
            await call(h, "schedule_create", {"when": "hourly", "task": "x"}, admin)
    assert "runs every 15 minute(s) at the closest" in str(too_often.value)
    assert "30 minutes (schedules.min_interval_minutes)" in str(too_often.value)
    assert "this chat already has 2 scheduled jobs" in str(chat_full.value)
    assert "(the limit, schedules.max_per_chat, is 2)" in str(chat_full.value)
    assert "you already have 3 scheduled jobs" in str(person_full.value)
    assert "(the limit, schedules.max_per_person, is 3)" in str(person_full.value)


async def test_people_see_and_change_only_their_conversations_jobs(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    async with Harness(tmp_path, fake_anthropic.url, clock=Clock(START)) as h:
        alice = await dm_context(h)
        bob = await dm_context(h, "bob")
        await call(h, "schedule_create", {"when": "every day at 9:00", "task": "alice's"}, alice)
        bobs = await call(h, "schedule_create", {"when": "every day at 9:00", "task": "bob's"}, bob)
        alice_sees = await call(h, "schedule_list", {}, alice)
        with pytest.raises(ToolError, match="no scheduled job #2 you may change"):
            await call(h, "schedule_pause", {"id": 2}, alice)
        with pytest.raises(ToolError, match="only an admin's direct messages"):
            await call(h, "schedule_list", {"all": True}, alice)
        paused = await call(h, "schedule_pause", {"id": 1}, alice)
        with pytest.raises(ToolError, match="already paused"):
            await call(h, "schedule_pause", {"id": 1}, alice)
        boss = await dm_context(h, "boss", admin=True)
        everything = await call(h, "schedule_list", {"all": True}, boss)
        resumed = await call(h, "schedule_resume", {"id": 1}, boss)
        cancelled = await call(h, "schedule_cancel", {"id": 2}, bob)
        left = await h.app.store.schedules()
    assert "alice's" in alice_sees and "bob's" not in alice_sees
    assert bobs.startswith("Scheduled job #2")
    assert paused == "Paused: #1 “alice's”"
    assert "alice's" in everything and "bob's" in everything and "set up by local:bob" in everything
    assert resumed.startswith("Resumed: #1") and "next: " in resumed
    assert cancelled == "Cancelled: #2 “bob's”"
    assert [(j.id, j.state) for j in left] == [(1, JobState.ACTIVE)]


async def due(h: Harness, clock: Clock, job_id: int, *, late: float = 1.0) -> None:
    """Move the clock to `late` seconds past the job's due time and let its timer fire."""
    assert h.app is not None
    job = await h.app.store.schedule_get(job_id)
    assert job is not None
    clock.now = job.next_run_at + late
    await h.app.scheduler.schedules.fire(str(job_id))
    await h.app.sender.wait_delivered(job.address)


async def test_a_due_run_is_a_turn_posted_once_to_its_conversation_with_its_cost(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.default_handler = answers_jobs
    clock = Clock(START)
    async with Harness(tmp_path, fake_anthropic.url, clock=clock) as h:
        alice = await dm_context(h)
        await call(
            h, "schedule_create", {"when": "every day at 9:00", "task": "count the ducks"}, alice
        )
        before = len(h.channel.finals)
        await due(h, clock, 1)
        sent = h.channel.finals[before:]
        job_requests = [r for r in fake_anthropic.requests if job_prompt(r.body)]
        await h.app.scheduler.schedules.fire("1")  # the same timer again: its run is done
        job = await h.app.store.schedule_get(1)
        session = await h.app.store.current_session(DM_KEY)
        transcript = await h.app.store.transcript(session.session_id)
        await h.send("/jobs")
    assert len(sent) == 1 and sent[0].startswith("JOB RAN: [Scheduled job #1")
    assert "This run is for Sat 2026-03-28 09:00 UTC" in sent[0] and "count the ducks" in sent[0]
    assert len(h.channel.finals) == before + 2  # the job's message, then /jobs: nothing again
    assert h.channel.deliveries[before].address == Address("local", "alice")
    [request] = job_requests
    assert "schedule_create" not in request.tool_names and "schedule_list" in request.tool_names
    assert job.runs == 1 and job.failures == 0 and job.last_outcome == "sent"
    assert job.cost_usd > 0 and job.last_cost_usd == job.cost_usd
    assert (
        utc(job.last_run_at) == "Sat 2026-03-28 09:00"
        and utc(job.next_run_at) == "Sun 2026-03-29 09:00"
    )
    assert any(getattr(e.payload, "purpose", None) == "job" for e in transcript)
    listing = h.channel.finals[-1]
    assert "#1 “count the ducks” · At 09:00 (UTC)" in listing
    assert "next: Sun 2026-03-29 09:00 UTC" in listing
    assert f"cost: ${job.cost_usd:.4f} over 1 run(s)" in listing


async def test_a_run_repeated_after_a_crash_is_not_posted_twice(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.default_handler = answers_jobs
    clock = Clock(START)
    async with Harness(tmp_path, fake_anthropic.url, clock=clock) as h:
        alice = await dm_context(h)
        await call(h, "schedule_create", {"when": "every day at 9:00", "task": "ducks"}, alice)
        job = await h.app.store.schedule_get(1)
        await due(h, clock, 1)
        posted = len(h.channel.finals)
        # A crash after the reply was queued but before the run was recorded: the row still
        # holds the due time when the next process starts.
        await h.app.store.db.execute(
            "UPDATE scheduled_jobs SET next_run_at = ?, runs = 0 WHERE id = 1", job.next_run_at
        )
        await h.app.scheduler.schedules.rebuild()
        await due(h, clock, 1, late=30)
        again = await h.app.store.schedule_get(1)
        model_calls = len([r for r in fake_anthropic.requests if job_prompt(r.body)])
    assert len(h.channel.finals) == posted  # the outbox already had that reply
    assert again.runs == 1 and utc(again.next_run_at) == "Sun 2026-03-29 09:00"
    assert model_calls == 1  # the turn was found written, so it was resumed, not asked again


async def test_three_failed_runs_pause_the_job_and_tell_its_creator(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    def fails(body: dict[str, Any]) -> Reply | ErrorReply:
        if job_prompt(body):
            return ErrorReply(500, "api_error", "the model is down")
        return Reply.text("ok")

    fake_anthropic.default_handler = fails
    clock = Clock(START)
    async with Harness(tmp_path, fake_anthropic.url, clock=clock) as h:
        alice = await dm_context(h)
        await call(h, "schedule_create", {"when": "every day at 9:00", "task": "ducks"}, alice)
        before = len(h.channel.finals)
        for _ in range(3):
            await due(h, clock, 1)
        job = await h.app.store.schedule_get(1)
        notes = h.channel.finals[before:]
        await due(h, clock, 1)  # paused: its timer does nothing
        quiet = len(h.channel.finals) - before
    assert len(notes) == 3 and quiet == 3
    assert notes[0].startswith("⚠️ Scheduled job #1 “ducks” could not run for Sat 2026-03-28")
    assert "Next try: Sun 2026-03-29 09:00 UTC" in notes[0]
    assert notes[2].startswith("⚠️ I paused scheduled job #1 “ducks”, set up by Alice (local:alice)")
    assert "its last 3 runs failed" in notes[2]
    assert job.state == JobState.PAUSED and job.failures == 3
    assert job.paused_reason.startswith("3 failed runs in a row")


@pytest.mark.parametrize("catch_up", ["once", "skip"])
async def test_runs_missed_while_down_run_once_naming_the_time_or_are_skipped(
    tmp_path: Path, fake_anthropic: FakeAnthropic, catch_up: str
) -> None:
    fake_anthropic.default_handler = answers_jobs
    clock = Clock(START)
    toml = f'[schedules]\ncatch_up = "{catch_up}"\n'
    async with Harness(tmp_path, fake_anthropic.url, toml, clock=clock) as h:
        alice = await dm_context(h)
        await call(h, "schedule_create", {"when": "every hour", "task": "ducks"}, alice)
        first_due = (await h.app.store.schedule_get(1)).next_run_at  # 13:00
        before = len(h.channel.finals)
        # Down from 12:30 until 15:20: 13:00, 14:00 and 15:00 were missed.
        await due(h, clock, 1, late=2 * 3600 + 20 * 60)
        job = await h.app.store.schedule_get(1)
        sent = h.channel.finals[before:]
    assert utc(job.next_run_at) == "Fri 2026-03-27 16:00"
    if catch_up == "skip":
        assert sent == [] and job.runs == 0
        assert job.last_outcome.startswith("skipped 3 run(s) missed while Krill was down")
        return
    [text] = sent
    assert job.runs == 1
    assert f"This run is for {describe_time(first_due + 7200, 'UTC')}" in text
    assert "20 minute(s) late" in text
    assert "2 earlier run(s)" in text and describe_time(first_due, "UTC") in text


async def test_jobs_command_lists_only_this_chat(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    async with Harness(tmp_path, fake_anthropic.url, clock=Clock(START)) as h:
        alice = await dm_context(h)
        await call(h, "schedule_create", {"when": "every day at 9:00", "task": "mine"}, alice)
        await h.send(message("/jobs", user="carol", chat_type=ChatType.DIRECT))
        carol = h.channel.finals[-1]
    assert carol.startswith("No scheduled jobs in this chat.")


async def test_a_run_while_its_conversation_is_over_a_spending_cap_is_skipped_unpaid(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.default_handler = answers_jobs
    clock = Clock(START)
    # Alice is no admin here (admins are never capped); her first turn spends the month's cap.
    toml = "[admin]\nlocal_is_admin = false\n[budgets]\nperson_monthly_usd = 0.001\n"
    async with Harness(tmp_path, fake_anthropic.url, toml, clock=clock) as h:
        alice = await dm_context(h)
        await call(
            h, "schedule_create", {"when": "every day at 9:00", "task": "count the ducks"}, alice
        )
        await due(h, clock, 1)
        job = await h.app.store.schedule_get(1)
    assert not [r for r in fake_anthropic.requests if job_prompt(r.body)]
    assert job is not None and job.failures == 0 and job.state == "active"
    assert job.last_outcome == "skipped: its conversation is over a spending cap"
    assert utc(job.next_run_at) == "Sun 2026-03-29 09:00"
