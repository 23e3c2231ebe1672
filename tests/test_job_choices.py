"""The "Pause job" button under a scheduled job's run, in-process with the real App and store
and a channel that shows buttons: the person who set the job up pauses it with a press (the
message then says so and loses its button, and /jobs shows it paused); someone else's press
is refused and changes nothing; a run repeated after a crash is still posted once."""

from __future__ import annotations

from pathlib import Path

from bot.channel_contract import PressResult
from bot.store.choices import ChoiceKind
from bot.store.schedules import JobState
from tests.app_harness import Harness
from tests.fakes.anthropic import FakeAnthropic
from tests.test_gateway_presses import ButtonRecorder, press, settled
from tests.test_schedules import START, Clock, answers_jobs, call, dm_context, due


async def test_a_run_offers_pause_job_to_its_creator_only(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.default_handler = answers_jobs
    channel = ButtonRecorder()
    clock = Clock(START)
    toml = "[admin]\nlocal_is_admin = false\n"  # so another local person is no admin
    async with Harness(tmp_path, fake_anthropic.url, toml, clock=clock, channel=channel) as h:
        assert h.app is not None
        alice = await dm_context(h)
        await call(h, "schedule_create", {"when": "every day at 9:00", "task": "count"}, alice)
        job = await h.app.store.schedule_get(1)
        assert job is not None
        before = len(channel.deliveries)
        await due(h, clock, 1)
        posted = channel.deliveries[before:]
        rows = channel.buttons[-1]
        assert rows is not None
        choice_id = rows[0][0].data.split(":")[1]
        choice = await h.app.store.choice_get(choice_id)
        # A crash after the reply was queued but before the run was recorded: the run is
        # repeated, and neither its message nor its button is offered again.
        await h.app.store.db.execute(
            "UPDATE scheduled_jobs SET next_run_at = ?, runs = 0 WHERE id = 1", job.next_run_at
        )
        await h.app.scheduler.schedules.rebuild()
        await due(h, clock, 1, late=30)
        repeated = channel.deliveries[before + len(posted) :]
        offered = await h.app.store.choices_unfinished(expired_by=clock.now + 10 * 86_400)
        # Someone else in the chat may not pause it.
        refused = await h.app.gateway.press(press(choice_id, 0, user="bob"))
        still = await h.app.store.schedule_get(1)
        answer = await h.app.gateway.press(press(choice_id, 0))
        await settled(h)
        edit = channel.deliveries[-1]
        edit_buttons = channel.buttons[-1]
        paused = await h.app.store.schedule_get(1)
        await h.send("/jobs")
        listing = h.channel.finals[-1]
    assert len(posted) == 1 and posted[0].text.startswith("JOB RAN: [Scheduled job #1")
    assert [b.label for row in rows for b in row] == ["⏸ Pause job"]
    assert choice is not None and choice.kind is ChoiceKind.JOB and choice.owner == "local:alice"
    assert refused.result is PressResult.NOT_YOURS
    assert still is not None and still.state is JobState.ACTIVE
    assert repeated == [] and [c.id for c in offered] == [choice_id]
    assert answer.result is PressResult.DONE
    assert edit.edit_of == "1" and edit_buttons == ()
    assert edit.text.startswith("JOB RAN: [Scheduled job #1")
    assert "⏸ Job #1 paused by Alice" in edit.text
    assert paused is not None and paused.state is JobState.PAUSED
    assert paused.paused_reason == "paused by Alice"
    assert "#1 “count”" in listing and "⏸ paused (paused by Alice)" in listing
