"""Scheduled jobs end to end: the real `krill run` with the fake Telegram Bot API, the fake
Slack and the fake model, the clock moved between starts with
`scheduler.clock_offset_seconds` (a process started "4 seconds before" a due time), never
by sleeping.

A job set up in plain English in a Telegram forum topic fires there at its times; a cron
job set up in a Slack thread lands in that thread; a run interrupted by kill -9 fires once
after the restart; with three replicas on PostgreSQL each due run is posted once; runs
missed over three due times run once, naming the time; a 9:00 Berlin job stays at 9:00
local across the change to summer time; three failed runs pause the job and tell its
creator; a group member who may not set up jobs is told who may; the limits say their
numbers."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import re
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import aiohttp
import pytest

from bot.scheduler.when import describe_time
from tests.channel_env import slack_section, telegram_section
from tests.fakes.anthropic import ErrorReply, FakeAnthropic, Reply
from tests.fakes.slack import FakeSlack, post_event
from tests.fakes.telegram import FakeTelegram
from tests.krill_process import KrillProcess, run_cli
from tests.replica_set import ReplicaSet, replica_config

FORUM = -100777
TOPIC = 7
GROUP = -100555
PERSON = 42
STRANGER = 43
TIMEOUT = 30.0
LEAD = 4.0  # a process starts this long before the due time it is for
RAN = "JOB RAN"
ASK = re.compile(r"schedule: (?P<when>[^|]+)\|(?P<task>(?:(?!<<<)[^\n])+)")


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        elif block.get("type") == "tool_result":
            parts.append(text_of(block.get("content") or ""))
    return "\n".join(parts)


def model_script(body: dict[str, Any]) -> Reply | ErrorReply:
    """Sets up a job when asked ("schedule: WHEN | TASK"), says back what the tool said,
    and answers a job's run by quoting its prompt."""
    last = body["messages"][-1]
    text = text_of(last["content"])
    if "[Scheduled job #" in text:
        return Reply.text(f"{RAN}: {text}")
    if isinstance(last["content"], list) and any(
        b.get("type") == "tool_result" for b in last["content"]
    ):
        return Reply.text(f"TOOL SAID: {text}")
    asked = ASK.search(text)
    if asked:
        args = {"when": asked["when"].strip(), "task": asked["task"].strip()}
        return Reply.tool_use("schedule_create", args)
    return Reply.text(f"echo: {text[-80:]}")


def telegram_config(tg: FakeTelegram, offset: float = 0.0, **sections: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "anthropic": {"max_retries": 0},
        "telegram": telegram_section(tg, mode="polling"),
        "scheduler": {"clock_offset_seconds": offset},
        "schedules": {"group_creators": [f"telegram:{PERSON}"]},
    }
    for name, section in sections.items():
        config[name] = config.get(name, {}) | section
    return config


def offset_before(due: float) -> float:
    """The clock offset that starts a process LEAD seconds before `due`."""
    return due - LEAD - time.time()


async def jobs_of(directory: Path, config: str = "krill.toml") -> list[dict[str, Any]]:
    code, out, err = await run_cli(directory, "schedules", "list", "--json", "--config", config)
    assert code == 0, err
    return list(json.loads(out))


async def recorded(directory: Path, runs: int, job_id: int = 1) -> dict[str, Any]:
    """The job once `runs` of its runs are recorded (a run's message goes out first)."""
    async with asyncio.timeout(TIMEOUT):
        while True:
            job = next(j for j in await jobs_of(directory) if j["id"] == job_id)
            if job["runs"] >= runs:
                return job
            await asyncio.sleep(0.2)


async def until(check: Callable[[], Any], within: float = TIMEOUT, what: str = "") -> Any:
    async with asyncio.timeout(within):
        while not (found := check()):  # noqa: ASYNC110
            await asyncio.sleep(0.05)
    return found


def bot_texts(tg: FakeTelegram, chat: int, needle: str) -> list[dict[str, Any]]:
    return [m for m in tg.bot_messages(chat) if needle in m.get("text", "")]


async def wait_bot_text(tg: FakeTelegram, chat: int, needle: str) -> dict[str, Any]:
    try:
        return (await until(lambda: bot_texts(tg, chat, needle)))[0]
    except TimeoutError:
        raise AssertionError(f"no {needle!r} in {chat}: {tg.sent_texts(chat)}") from None


@pytest.fixture
async def fakes() -> AsyncIterator[tuple[FakeTelegram, FakeAnthropic]]:
    async with FakeTelegram() as tg, FakeAnthropic() as model:
        model.default_handler = model_script
        yield tg, model


async def set_up(
    directory: Path, tg: FakeTelegram, model: FakeAnthropic, update: dict[str, Any], chat: int,
    **sections: Any,
) -> dict[str, Any]:  # fmt: skip
    """A first process in which `update` asks for a job; returns what the bot said back."""
    async with KrillProcess(directory, telegram_config(tg, **sections), model.env()):
        tg.push_update(update)
        return await wait_bot_text(tg, chat, "TOOL SAID:")


async def test_a_forum_topic_job_in_plain_english_fires_there_at_its_times(
    tmp_path: Path, fakes: tuple[FakeTelegram, FakeAnthropic]
) -> None:
    tg, model = fakes
    ask = tg.group_message(
        FORUM, PERSON, "schedule: every weekday at 9:00 | post the stand-up list",
        mention=True, topic_message=True, thread_id=TOPIC,
    )  # fmt: skip
    said = await set_up(tmp_path, tg, model, ask, FORUM)
    assert said["message_thread_id"] == TOPIC
    assert "At 09:00, Monday through Friday (UTC)" in said["text"]
    [job] = await jobs_of(tmp_path)
    assert f"Next runs: {describe_time(job['next_run_at'], 'UTC')}; " in said["text"]
    assert job["session_key"] == f"agent:main:telegram:group:{FORUM}:topic:{TOPIC}"
    dues = []
    for run in (1, 2):
        dues.append(job["next_run_at"])
        config = telegram_config(tg, offset_before(dues[-1]))
        async with KrillProcess(tmp_path, config, model.env()):
            when = describe_time(dues[-1], "UTC")
            fired = await wait_bot_text(tg, FORUM, f"This run is for {when}")
            job = await recorded(tmp_path, run)
        assert fired["message_thread_id"] == TOPIC and "post the stand-up list" in fired["text"]
    days = [dt.datetime.fromtimestamp(d, dt.UTC) for d in dues]
    assert all((d.hour, d.minute) == (9, 0) and d.weekday() < 5 for d in days)
    assert dues[1] > dues[0] and len(bot_texts(tg, FORUM, RAN)) == 2
    assert job["next_run_at"] > dues[1] and job["last_outcome"] == "sent"


async def test_a_cron_job_set_up_in_a_slack_thread_lands_in_that_thread(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.default_handler = model_script
    root = "1767225600.000100"

    def in_thread(needle: str) -> Callable[[dict[str, Any]], bool]:
        def match(params: dict[str, Any]) -> bool:
            text = str(params.get("markdown_text") or params.get("text") or "")
            return params.get("thread_ts") == root and needle in text

        return match

    async with FakeSlack() as slack:
        slack.set_thread("C1", root, [{"user": "U2", "text": "ticket triage", "ts": root}])

        def config(offset: float = 0.0) -> dict[str, Any]:
            return {
                "anthropic": {"max_retries": 0},
                "slack": slack_section(slack),
                "scheduler": {"clock_offset_seconds": offset},
                "schedules": {"group_creators": ["slack:U1"]},
            }

        async with KrillProcess(tmp_path, config(), fake_anthropic.env()) as krill:
            ask = slack.app_mention(
                "C1", "U1", "schedule: 30 8 * * 1-5 | summarise the open tickets", thread_ts=root
            )
            status, _ = await post_event(
                None, f"{krill.url}/slack/events", ask, slack.signing_secret
            )
            assert status == 200
            [said] = await slack.wait_for("chat.postMessage", 1, TIMEOUT, in_thread("TOOL SAID"))
        assert "At 08:30, Monday through Friday (UTC)" in said["markdown_text"]
        [job] = await jobs_of(tmp_path)
        assert job["address"] == {
            "channel": "slack", "chat_id": "C1", "thread_id": root, "reply_to": None,
            "private_to": None,
        }  # fmt: skip
        async with KrillProcess(
            tmp_path, config(offset_before(job["next_run_at"])), fake_anthropic.env()
        ):
            when = describe_time(job["next_run_at"], "UTC")
            [fired] = await slack.wait_for(
                "chat.postMessage", 1, TIMEOUT, in_thread(f"This run is for {when}")
            )
            await recorded(tmp_path, 1)
            buttons = slack.buttons("C1")
    assert fired["channel"] == "C1" and "summarise the open tickets" in fired["text"]
    assert buttons == ["⏸ Pause job"]  # the run carries its button


async def test_a_run_cut_short_by_kill_9_fires_once_after_the_restart(
    tmp_path: Path, fakes: tuple[FakeTelegram, FakeAnthropic]
) -> None:
    tg, model = fakes
    ask = tg.private_message(PERSON, "schedule: every day at 9:00 | count the ducks")
    await set_up(tmp_path, tg, model, ask, PERSON)
    [job] = await jobs_of(tmp_path)
    config = telegram_config(tg, offset_before(job["next_run_at"]))

    def job_calls() -> int:
        return sum("[Scheduled job #" in r.last_user_text for r in model.message_requests)

    release = asyncio.Event()

    async def in_flight(body: dict[str, Any]) -> Reply | ErrorReply:
        """The run's first model call is still waiting for its answer when Krill dies."""
        if "[Scheduled job #" in text_of(body["messages"][-1]["content"]) and job_calls() == 1:
            await release.wait()
        return model_script(body)

    model.default_handler = in_flight
    killed = KrillProcess(tmp_path, config, model.env())
    try:
        await killed.start()
        await until(job_calls)
        await killed.kill()
    finally:
        release.set()
        await killed.stop()
    async with KrillProcess(tmp_path, config, model.env()):
        await wait_bot_text(tg, PERSON, RAN)
        job = await recorded(tmp_path, 1)
        # Sent after the run was recorded, answered after anything queued before it.
        tg.push_update(tg.private_message(PERSON, "sentinel one"))
        await wait_bot_text(tg, PERSON, "sentinel one")
    assert len(bot_texts(tg, PERSON, RAN)) == 1
    assert job_calls() == 2  # the interrupted run was taken up again, once
    assert job["runs"] == 1 and job["last_outcome"] == "sent"


@pytest.mark.timeout(420)  # two rounds of three replicas starting, on a 2-core machine
async def test_three_replicas_on_postgresql_post_each_due_run_once(
    tmp_path: Path, fakes: tuple[FakeTelegram, FakeAnthropic], pg_url: str
) -> None:
    tg, model = fakes
    chats = [7201, 7202, 7203]
    lead = 30.0  # every replica is up before the due time, on a loaded 2-core machine too
    setup = ReplicaSet(tmp_path, tg, model, replica_config(tg, pg_url), 1)
    await setup.start()
    try:
        async with aiohttp.ClientSession() as http:
            for chat in chats:
                ask = tg.private_message(chat, f"schedule: every day at 9:00 | ducks of {chat}")
                await setup.post_update(http, ask)
                await wait_bot_text(tg, chat, "TOOL SAID:")
    finally:
        await setup.stop()
    due = (await jobs_of(tmp_path))[0]["next_run_at"]
    contended = 0
    for run in (1, 2):
        offset = due - lead - time.time()
        config = replica_config(tg, pg_url, scheduler={"clock_offset_seconds": offset})
        replicas = ReplicaSet(tmp_path, tg, model, config, 3)
        await replicas.start()
        try:
            when = describe_time(due, "UTC")
            for chat in chats:
                await wait_bot_text(tg, chat, f"This run is for {when}")
            for job_id in (1, 2, 3):
                await recorded(tmp_path, run, job_id)
            async with aiohttp.ClientSession() as http:
                for chat in chats:
                    await replicas.post_update(http, tg.private_message(chat, f"sentinel {run}"))
                    await wait_bot_text(tg, chat, f"sentinel {run}")
            contended += sum(r.log().count("was done elsewhere") for r in replicas.replicas)
        finally:
            await replicas.stop()
        for chat in chats:
            assert len(bot_texts(tg, chat, RAN)) == run, tg.sent_texts(chat)
        due = (await jobs_of(tmp_path))[0]["next_run_at"]
    assert contended > 0  # other replicas' timers fired too, and found the run done


async def test_runs_missed_over_three_due_times_run_once_naming_the_time(
    tmp_path: Path, fakes: tuple[FakeTelegram, FakeAnthropic]
) -> None:
    tg, model = fakes
    await set_up(
        tmp_path, tg, model, tg.private_message(PERSON, "schedule: every hour | ducks"), PERSON
    )
    [job] = await jobs_of(tmp_path)
    first = job["next_run_at"]
    first_due = describe_time(first, "UTC")
    # Down over `first` and the two hours after it; back 20 minutes past the third.
    config = telegram_config(tg, first + 2 * 3600 + 20 * 60 - time.time())
    async with KrillProcess(tmp_path, config, model.env()):
        fired = await wait_bot_text(tg, PERSON, RAN)
        job = await recorded(tmp_path, 1)
        tg.push_update(tg.private_message(PERSON, "sentinel one"))
        await wait_bot_text(tg, PERSON, "sentinel one")
    assert len(bot_texts(tg, PERSON, RAN)) == 1
    assert f"This run is for {describe_time(first + 7200, 'UTC')}" in fired["text"]
    assert "20 minute(s) late" in fired["text"]
    missed = f"2 earlier run(s) missed while Krill was down (the first was due {first_due})"
    assert missed in fired["text"]
    assert job["next_run_at"] == first + 3 * 3600


def utc_ts(*parts: int) -> float:
    return dt.datetime(*parts, tzinfo=ZoneInfo("UTC")).timestamp()  # type: ignore[misc]


async def test_a_nine_oclock_berlin_job_fires_at_nine_local_on_both_sides_of_dst(
    tmp_path: Path, fakes: tuple[FakeTelegram, FakeAnthropic]
) -> None:
    tg, model = fakes
    friday_noon = utc_ts(2026, 3, 27, 12)  # Berlin moves to summer time on Sunday the 29th
    ask = tg.private_message(PERSON, "schedule: every day at 9:00 Berlin time | ducks")
    config = telegram_config(tg, friday_noon - time.time())
    async with KrillProcess(tmp_path, config, model.env()):
        tg.push_update(ask)
        await wait_bot_text(tg, PERSON, "TOOL SAID:")
    [job] = await jobs_of(tmp_path)
    expected = [
        (utc_ts(2026, 3, 28, 8), "Sat 2026-03-28 09:00 CET"),
        (utc_ts(2026, 3, 29, 7), "Sun 2026-03-29 09:00 CEST"),
    ]
    for run, (due, local) in enumerate(expected, start=1):
        assert job["next_run_at"] == due
        async with KrillProcess(tmp_path, telegram_config(tg, offset_before(due)), model.env()):
            await wait_bot_text(tg, PERSON, f"This run is for {local}")
            job = await recorded(tmp_path, run)
    assert job["next_run_at"] == utc_ts(2026, 3, 30, 7)


async def test_three_failed_runs_pause_the_job_and_tell_its_creator(
    tmp_path: Path, fakes: tuple[FakeTelegram, FakeAnthropic]
) -> None:
    tg, model = fakes

    def failing(body: dict[str, Any]) -> Reply | ErrorReply:
        if "[Scheduled job #" in text_of(body["messages"][-1]["content"]):
            return ErrorReply(500, "api_error", "the model is down")
        return model_script(body)

    model.default_handler = failing
    ask = tg.private_message(PERSON, "schedule: every hour | ducks", first_name="Alice")
    await set_up(tmp_path, tg, model, ask, PERSON)
    for run in (1, 2, 3):
        [job] = await jobs_of(tmp_path)
        config = telegram_config(tg, offset_before(job["next_run_at"]))
        async with KrillProcess(tmp_path, config, model.env()):
            job = await recorded(tmp_path, run)
            await until(lambda n=run: len(bot_texts(tg, PERSON, "⚠️")) == n)
    notes = [m["text"] for m in bot_texts(tg, PERSON, "⚠️")]
    assert [n.split(" ")[1] for n in notes] == ["Scheduled", "Scheduled", "I"]
    assert "could not run for" in notes[0] and "the model is down" in notes[0]
    assert "set up by Alice (telegram:42)" in notes[2] and "its last 3 runs failed" in notes[2]
    assert job["state"] == "paused" and job["failures"] == 3
    assert bot_texts(tg, PERSON, RAN) == []


async def test_who_may_not_is_told_who_may_and_limits_say_their_numbers(
    tmp_path: Path, fakes: tuple[FakeTelegram, FakeAnthropic]
) -> None:
    tg, model = fakes
    config = telegram_config(tg, schedules={"max_per_chat": 1})

    async def ask(user: int, text: str, *, group: bool = True) -> str:
        chat = GROUP if group else user
        seen = len(bot_texts(tg, chat, "TOOL SAID:"))
        update = (
            tg.group_message(GROUP, user, text, mention=True)
            if group
            else tg.private_message(user, text)
        )
        tg.push_update(update)
        found = await until(lambda: bot_texts(tg, chat, "TOOL SAID:")[seen:])
        return str(found[0]["text"])

    async with KrillProcess(tmp_path, config, model.env()):
        stranger = await ask(STRANGER, "schedule: every day at 9:00 | ducks")
        often = await ask(PERSON, "schedule: every 5 minutes | ducks")
        first = await ask(PERSON, "schedule: every day at 9:00 | ducks")
        full = await ask(PERSON, "schedule: every day at 10:00 | geese")
        own_dm = await ask(STRANGER, "schedule: every day at 9:00 | my ducks", group=False)
        tg.push_update(tg.group_message(GROUP, STRANGER, "/jobs", mention=True))
        listing = await wait_bot_text(tg, GROUP, "Scheduled jobs here (1)")
    assert "only admins and the people listed in schedules.group_creators" in stranger
    assert f"'telegram:{STRANGER}'" in stranger and "direct message" in stranger
    assert "the shortest interval allowed is 15 minutes" in often
    assert "Scheduled job #1" in first
    assert "(the limit, schedules.max_per_chat, is 1)" in full
    assert "Scheduled job #2" in own_dm
    assert "#1 “ducks”" in listing["text"] and "my ducks" not in listing["text"]


async def test_the_console_lists_jobs_and_pauses_resumes_and_cancels_them(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.default_handler = model_script
    token = "console-Token_4711-long-enough"
    bearer = {"Authorization": f"Bearer {token}"}
    config = {"anthropic": {"max_retries": 0}, "admin": {"console_token": token}}
    async with (
        KrillProcess(tmp_path, config, fake_anthropic.env()) as krill,
        aiohttp.ClientSession(headers=bearer) as http,
    ):
        said = await krill.chat("schedule: every weekday at 9:00 | <b>count</b> the ducks")
        assert "Scheduled job #1" in " ".join(said["replies"]), said

        async def jobs_page() -> str:
            async with http.get(f"{krill.url}/admin/jobs") as resp:
                assert resp.status == 200
                return await resp.text()

        async def act(action: str, job: str = "1") -> str:
            form = {"id": job, "action": action}
            async with http.post(f"{krill.url}/admin/jobs", data=form) as resp:
                assert resp.status == 200  # after the redirect back to the page
                return await resp.text()

        listed = await jobs_page()
        paused = await act("pause")
        resumed = await act("resume")
        again = await act("resume")
        cancelled = await act("cancel")
        async with http.post(f"{krill.url}/admin/jobs", data={"id": "x", "action": "pause"}) as r:
            bad = r.status
    assert listed.count('data-testid="job-row"') == 1
    assert "At 09:00, Monday through Friday (UTC)" in listed
    assert "&lt;b&gt;count&lt;/b&gt;" in listed and "<b>count</b>" not in listed
    assert 'data-testid="job-pause"' in listed and 'data-testid="job-cancel"' in listed
    assert "#1 " in paused and 'data-testid="job-resume"' in paused and "paused by" in paused
    assert 'data-testid="job-pause"' in resumed
    assert "already active" in again
    assert "No scheduled jobs" in cancelled
    assert bad == 400
