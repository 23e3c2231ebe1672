"""Presses in-process, the real App and store with a channel that shows buttons: a press is
acted on in the session's lane and edits its message without buttons; an unanswered choice
expires at the sweep and a later press is told so; a press recorded before a stop is acted
on at the next start, and one another process left behind is picked up by the sweep."""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from pathlib import Path

from bot.buttons.choices import button_data
from bot.channel_contract import PressResult
from bot.store.choices import ChoiceStatus
from bot.types import ButtonPress, ButtonRows, OutboundMessage
from tests.app_harness import Harness, RecordingChannel, message
from tests.fakes.anthropic import FakeAnthropic

KEY = "agent:main:local:direct:alice"
MODELS = """
[agent]
models = ["claude-sonnet-4-6", "claude-haiku-4-5"]
[buttons]
expire_after = "60s"
[storage]
lease_seconds = 15
"""
_ids = itertools.count(1)


@dataclass
class ButtonRecorder(RecordingChannel):
    """The recording channel, showing buttons: what each delivery carried."""

    button_label_chars: int = 64
    buttons: list[ButtonRows | None] = field(default_factory=list)

    async def deliver(self, out: OutboundMessage) -> str:
        self.buttons.append(out.buttons)
        return await super().deliver(out)


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def press(choice_id: str, option: int, user: str = "alice") -> ButtonPress:
    data = button_data(choice_id, option)
    return ButtonPress("local", f"p{next(_ids)}", data, "alice", user, user.title(), "1")


async def offered(h: Harness, channel: ButtonRecorder) -> str:
    """`/model` sent; the id of the choice it offered."""
    await h.send("/model")
    rows = channel.buttons[-1]
    assert rows is not None
    assert [b.label for row in rows for b in row] == ["claude-sonnet-4-6", "claude-haiku-4-5"]
    return rows[0][0].data.split(":")[1]


async def settled(h: Harness) -> None:
    assert h.app is not None
    await h.app.gateway.wait_idle(message("x"))


async def test_a_press_is_acted_on_and_its_message_shows_it_without_buttons(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    channel = ButtonRecorder()
    async with Harness(tmp_path, fake_anthropic.url, MODELS, channel=channel) as h:
        assert h.app is not None
        choice_id = await offered(h, channel)
        answer = await h.app.gateway.press(press(choice_id, 1))
        assert (answer.result, answer.text) == (PressResult.DONE, "✓ claude-haiku-4-5")
        await settled(h)
        edit = channel.deliveries[-1]
        assert edit.edit_of == "1" and channel.buttons[-1] == ()
        assert "▶ claude-haiku-4-5 (current)" in edit.text
        assert "switched to claude-haiku-4-5 by Alice" in edit.text
        session = await h.app.store.current_session(KEY)
        assert session is not None and session.chosen_model == "claude-haiku-4-5"


async def test_an_unanswered_choice_expires_at_the_sweep(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    channel, clock = ButtonRecorder(), Clock()
    async with Harness(tmp_path, fake_anthropic.url, MODELS, clock=clock, channel=channel) as h:
        assert h.app is not None
        choice_id = await offered(h, channel)
        await h.app.presses.sweep()
        assert (await h.app.store.choice_get(choice_id)).status is ChoiceStatus.PENDING  # type: ignore[union-attr]
        clock.now += 61
        await h.app.presses.sweep()
        await settled(h)
        assert "No answer in time" in channel.deliveries[-1].text and channel.buttons[-1] == ()
        late = await h.app.gateway.press(press(choice_id, 1))
        assert (late.result, late.text) == (PressResult.EXPIRED, "Sorry, this button has expired.")
        session = await h.app.store.current_session(KEY)
        assert session is None or session.chosen_model == ""


async def record_press(h: Harness, choice_id: str, at: float) -> None:
    """A press recorded and not acted on, as a process that stopped at once left it."""
    assert h.app is not None
    await h.app.store.choice_press(
        choice_id, option=1, by="local:alice", name="Alice", press_id="q-" + choice_id,
        message_id="", at=at,
    )  # fmt: skip


async def test_a_press_another_process_left_is_picked_up_after_a_lease(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    channel, clock = ButtonRecorder(), Clock()
    async with Harness(tmp_path, fake_anthropic.url, MODELS, clock=clock, channel=channel) as h:
        assert h.app is not None
        choice_id = await offered(h, channel)
        await record_press(h, choice_id, clock.now)
        await h.app.presses.sweep()  # the process that recorded it may be acting on it
        assert (await h.app.store.choice_get(choice_id)).status is ChoiceStatus.PRESSED  # type: ignore[union-attr]
        clock.now += 16  # longer than a lease
        await h.app.presses.sweep()
        await settled(h)
        assert (await h.app.store.choice_get(choice_id)).status is ChoiceStatus.DONE  # type: ignore[union-attr]
        assert "switched to claude-haiku-4-5" in channel.deliveries[-1].text


async def test_a_press_recorded_before_a_stop_is_acted_on_at_the_next_start(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    first = ButtonRecorder()
    async with Harness(tmp_path, fake_anthropic.url, MODELS, channel=first) as h:
        choice_id = await offered(h, first)
        await record_press(h, choice_id, time.time())
    later = ButtonRecorder()
    async with Harness(tmp_path, fake_anthropic.url, MODELS, channel=later) as again:
        assert again.app is not None
        await settled(again)
        done = await again.app.store.choice_get(choice_id)
        assert done is not None and done.status is ChoiceStatus.DONE
        (edit,) = later.deliveries
        assert edit.edit_of == "1" and "switched to claude-haiku-4-5" in edit.text
