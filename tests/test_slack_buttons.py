"""Buttons on Slack, the adapter against the fake Slack: a reply's buttons as Block Kit
actions, a press over Socket Mode or signed at /slack/interactivity handed to the core
before Slack is acknowledged, refusals told to the presser alone, and edits (also of an
answer only its person sees) that take the buttons away."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from bot.buttons.choices import button_data
from bot.channel_contract import PressAnswer, PressResult
from bot.types import Address, Button, ButtonStyle, InboundMessage, OutboundMessage
from tests.fakes.slack import FakeSlack, interactivity_form, post_event
from tests.slack_channel import Factory, until

ROWS = (
    (
        Button("✅ Approve", button_data("B" * 16, 0), ButtonStyle.PRIMARY),
        Button("❌ Deny", button_data("B" * 16, 1), ButtonStyle.DANGER),
    ),
)


def offer(chat: str = "C1", **address: Any) -> OutboundMessage:
    return OutboundMessage(
        Address("slack", chat, **address), "Send *report.pdf*?", "choice-1", 0, buttons=ROWS
    )


async def test_buttons_are_actions_and_a_socket_press_is_recorded_before_the_ack(
    make_channel: Factory, fake_slack: FakeSlack
) -> None:
    channel, core, _ = await make_channel("socket")
    ts = await channel.deliver(offer())
    assert fake_slack.buttons("C1") == ["✅ Approve", "❌ Deny"]
    (post,) = fake_slack.calls_to("chat.postMessage")
    assert post["text"]  # the notification's text, beside the blocks
    core.press_gate = asyncio.Event()
    envelope = await fake_slack.push_socket_interactive(fake_slack.press("C1", "U7", "❌ Deny"))
    await asyncio.wait_for(core.waiting.wait(), 5)
    assert envelope not in fake_slack.socket_acks  # not recorded yet, so not acknowledged
    core.press_gate.set()
    await fake_slack.wait_for_ack(envelope)
    (press,) = core.presses
    assert (press.channel, press.chat_id, press.user_id, press.message_id) == (
        "slack",
        "C1",
        "U7",
        ts,
    )
    assert press.data == ROWS[0][1].data and press.press_id
    assert fake_slack.calls_to("chat.postEphemeral") == []  # it counted: the edit says so


async def test_http_presses_are_signed_and_a_forged_one_is_refused(
    make_channel: Factory, fake_slack: FakeSlack
) -> None:
    channel, core, events = await make_channel("http")
    await channel.deliver(offer())
    secret = fake_slack.signing_secret
    url = events.replace("/slack/events", "/slack/interactivity")
    forged = interactivity_form(fake_slack.press("C1", "U7", "✅ Approve"))
    status, _ = await post_event(None, url, forged, secret, forge=True)
    assert status == 401
    stale = interactivity_form(fake_slack.press("C1", "U7", "✅ Approve"))
    status, _ = await post_event(None, url, stale, secret, timestamp=int(time.time()) - 600)
    assert status == 401
    assert core.presses == []
    good = interactivity_form(fake_slack.press("C1", "U7", "✅ Approve"))
    status, _ = await post_event(None, url, good, secret)
    assert status == 200
    # The events URL takes presses too, with the same signature check.
    status, _ = await post_event(None, events, good, secret)
    assert status == 200
    assert [p.user_id for p in core.presses] == ["U7", "U7"]


async def test_a_press_that_does_not_count_is_explained_to_the_presser_alone(
    make_channel: Factory, fake_slack: FakeSlack
) -> None:
    channel, core, _ = await make_channel("socket")
    await channel.deliver(offer(thread_id="111.000100"))
    core.answer = PressAnswer(PressResult.NOT_YOURS, "Only Alice or an admin can answer this.")
    envelope = await fake_slack.push_socket_interactive(fake_slack.press("C1", "U8", "✅ Approve"))
    await fake_slack.wait_for_ack(envelope)
    await until(lambda: fake_slack.calls_to("chat.postEphemeral"))
    (told,) = fake_slack.calls_to("chat.postEphemeral")
    assert (told["channel"], told["user"], told["thread_ts"]) == ("C1", "U8", "111.000100")
    assert told["text"] == "Only Alice or an admin can answer this."


async def test_an_edit_with_no_buttons_takes_them_away(
    make_channel: Factory, fake_slack: FakeSlack
) -> None:
    channel, _, _ = await make_channel("socket")
    ts = await channel.deliver(offer())
    done = OutboundMessage(
        Address("slack", "C1"), "Send report.pdf?\n\n✅ Approved", "done", 0, edit_of=ts, buttons=()
    )
    assert await channel.deliver(done) == ts
    assert fake_slack.buttons("C1", ts) == []
    assert "Approved" in fake_slack.message_texts("C1")[-1]


async def test_buttons_on_an_answer_only_its_person_sees(
    make_channel: Factory, fake_slack: FakeSlack
) -> None:
    channel, core, _ = await make_channel("socket")

    async def answer(msg: InboundMessage) -> None:
        await channel.deliver(
            OutboundMessage(msg.address, "Pick a model", "models", 0, buttons=ROWS)
        )

    core.on_accept = answer
    envelope = await fake_slack.push_socket_slash_command(
        fake_slack.slash_command(text="model", user_id="U5", channel_id="C2")
    )
    await fake_slack.wait_for_ack(envelope)
    await until(lambda: fake_slack.ephemeral_buttons("U5"))
    assert fake_slack.ephemeral_buttons("U5") == ["✅ Approve", "❌ Deny"]
    envelope = await fake_slack.push_socket_interactive(fake_slack.press_ephemeral("U5", "❌ Deny"))
    await fake_slack.wait_for_ack(envelope)
    (press,) = core.presses
    # Its outcome replaces the private message, through the press's response_url.
    done = OutboundMessage(
        Address("slack", "C2", private_to="U5"),
        "Pick a model\n\n❌ Denied",
        "done",
        0,
        edit_of=press.message_id,
        buttons=(),
    )
    assert await channel.deliver(done) == press.message_id
    assert fake_slack.ephemeral_buttons("U5") == []
    replaced = next(m for m in fake_slack.ephemerals if m["ts"] == press.message_id)
    assert "Denied" in replaced["text"]
