"""The Slack adapter in-process: the real slack-bolt app and Web API client against the fake
Slack, with a stub core, for the cases end-to-end runs cannot pin down (ack ordering,
concurrent duplicates, fallbacks when Slack refuses a feature, reconnects)."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from bot.channel_contract import (
    RETRYING,
    AcceptResult,
    SendFailure,
    SendFailureKind,
    channel_health,
)
from bot.types import Address, InboundMessage, OutboundMessage, Source
from channels.slack.config import SlackConfig
from channels.slack.indicators import THINKING_STATUS
from channels.slack.transport import SlackSetupError
from tests.fakes.slack import FakeSlack, post_event
from tests.slack_channel import Factory, until

# --- acknowledgement and dedupe ------------------------------------------------------------


async def test_socket_ack_waits_until_the_event_is_accepted(
    make_channel: Factory, fake_slack: FakeSlack
) -> None:
    _, core, _ = await make_channel("socket")
    core.gate, core.passes = asyncio.Event(), {"sentinel"}
    envelope = await fake_slack.push_socket_event(fake_slack.im_message("U1", "hi"))
    await asyncio.wait_for(core.waiting.wait(), 5)
    # Acks share one socket, in order: an ack of "hi" sent before it was recorded would
    # have arrived before the ack of a later event.
    sentinel = await fake_slack.push_socket_event(fake_slack.im_message("U1", "sentinel"))
    await fake_slack.wait_for_ack(sentinel)
    assert envelope not in fake_slack.socket_acks  # not recorded yet, so not acknowledged
    core.gate.set()
    await fake_slack.wait_for_ack(envelope)
    assert [m.text for m in core.accepted] == ["sentinel", "hi"]


async def test_http_body_that_is_not_utf8_is_a_bad_request(
    make_channel: Factory, fake_slack: FakeSlack
) -> None:
    _, core, url = await make_channel("http")
    body = json.dumps(fake_slack.im_message("U1", "PLACEHOLDER")).encode()
    broken = body.replace(b"PLACEHOLDER", b"bad \xff bytes")
    # Signed correctly over the raw bytes: only the encoding is wrong, so not a 401.
    status, text = await post_event(None, url, None, fake_slack.signing_secret, raw_body=broken)
    assert status == 400 and "UTF-8" in text
    status, _ = await post_event(None, url, None, fake_slack.signing_secret, raw_body=body)
    assert status == 200
    assert [m.text for m in core.accepted] == ["PLACEHOLDER"]


async def test_http_response_waits_until_the_event_is_accepted(
    make_channel: Factory, fake_slack: FakeSlack
) -> None:
    _, core, url = await make_channel("http")
    core.gate, core.passes = asyncio.Event(), {"sentinel"}
    secret = fake_slack.signing_secret
    request = asyncio.create_task(post_event(None, url, fake_slack.im_message("U1", "hi"), secret))
    await asyncio.wait_for(core.waiting.wait(), 5)
    # A later request answered in full: an early answer to "hi" would have come by now.
    status, _ = await post_event(None, url, fake_slack.im_message("U1", "sentinel"), secret)
    assert status == 200
    assert not request.done()
    core.gate.set()
    status, _ = await request
    assert status == 200 and [m.text for m in core.accepted] == ["sentinel", "hi"]


async def test_concurrent_twin_events_are_accepted_once(
    make_channel: Factory, fake_slack: FakeSlack
) -> None:
    _, core, url = await make_channel("http")
    core.gate, core.passes = asyncio.Event(), {"sentinel"}
    mention = fake_slack.app_mention("C1", "U1", "hello")
    ts = mention["event"]["ts"]
    twin = fake_slack.channel_message("C1", "U1", mention["event"]["text"], ts=ts)
    secret = fake_slack.signing_secret
    sends = [
        asyncio.create_task(post_event(None, url, payload, secret, **kw))
        for payload, kw in ((mention, {}), (twin, {}), (mention, {"retry_num": 1}))
    ]
    # The first delivery waits in accept(); a request sent after all three and answered
    # meanwhile lets the other two reach the adapter while it waits.
    await asyncio.wait_for(core.waiting.wait(), 5)
    status, _ = await post_event(None, url, fake_slack.im_message("U2", "sentinel"), secret)
    assert status == 200
    assert not any(send.done() for send in sends)  # the twins wait for the first delivery
    core.gate.set()
    assert [status for status, _ in await asyncio.gather(*sends)] == [200, 200, 200]
    status, _ = await post_event(None, url, mention, secret, retry_num=2)
    assert status == 200
    accepted = [m for m in core.accepted if m.text != "sentinel"]
    assert len(accepted) == 1 and len(core.accepted) == 2
    msg = accepted[0]
    assert msg.message_id == f"C1:{ts}" and msg.thread_id == ts and msg.mentioned


async def test_unknown_events_and_subtypes_are_acked_and_ignored(
    make_channel: Factory, fake_slack: FakeSlack
) -> None:
    _, core, _ = await make_channel("socket")
    payloads = [
        fake_slack.event_callback({"type": "reaction_added", "user": "U1", "reaction": "x"}),
        fake_slack.message_changed("C1", "1.000100", "edited"),
        fake_slack.message_deleted("C1", "1.000100"),
        fake_slack.bot_message("C1", "beep"),
        fake_slack.channel_message("C1", "UBOT", "myself"),
    ]
    for payload in payloads:
        await fake_slack.wait_for_ack(await fake_slack.push_socket_event(payload))
    assert core.accepted == []


# --- threads -------------------------------------------------------------------------------


async def test_thread_participation(make_channel: Factory, fake_slack: FakeSlack) -> None:
    _, core, _ = await make_channel("socket")

    async def send(payload: dict[str, Any]) -> None:
        await fake_slack.wait_for_ack(await fake_slack.push_socket_event(payload))

    # Chatter in a thread Krill is not in is left to Slack (fetched if Krill is called in).
    await send(fake_slack.channel_message("C1", "U1", "psst", thread_ts="1.000100"))
    assert core.accepted == []
    # A reply under Krill's own message addresses Krill.
    await send(
        fake_slack.channel_message(
            "C1", "U1", "thanks!", thread_ts="2.000100", parent_user_id="UBOT"
        )
    )
    # A thread whose session already exists (e.g. before a restart) counts too.
    core.sessions.add("agent:main:slack:channel:c1:thread:3.000100")
    await send(fake_slack.channel_message("C1", "U1", "still there?", thread_ts="3.000100"))
    # And so does a thread Krill was mentioned in earlier in this run.
    await send(fake_slack.app_mention("C1", "U1", "join", thread_ts="4.000100"))
    await send(fake_slack.channel_message("C1", "U2", "welcome", thread_ts="4.000100"))
    assert [(m.text, m.mentioned) for m in core.accepted] == [
        ("thanks!", True),
        ("still there?", True),
        ("join", True),
        ("welcome", True),
    ]
    # History was fetched only where Krill had no part yet.
    fetched = {p["ts"] for p in fake_slack.calls_to("conversations.replies")}
    assert fetched == {"4.000100"}


async def test_unmentioned_thread_chatter_is_answered_when_mentions_are_off(
    make_channel: Factory, fake_slack: FakeSlack
) -> None:
    _, core, _ = await make_channel("socket", channels={"C1": {"require_mention": False}})
    payload = fake_slack.channel_message("C1", "U1", "anyone?", thread_ts="5.000100")
    await fake_slack.wait_for_ack(await fake_slack.push_socket_event(payload))
    assert [m.thread_id for m in core.accepted] == ["5.000100"]


async def test_history_failure_still_accepts(make_channel: Factory, fake_slack: FakeSlack) -> None:
    _, core, _ = await make_channel("socket")
    fake_slack.fail_next("conversations.replies", "internal_error")
    fake_slack.fail_next("users.info", "user_not_found")
    payload = fake_slack.app_mention("C1", "U1", "help", thread_ts="6.000100")
    await fake_slack.wait_for_ack(await fake_slack.push_socket_event(payload))
    (msg,) = core.accepted
    assert msg.context_lines == [] and msg.user_name == ""


# --- replies -------------------------------------------------------------------------------


def out(address: Address, text: str, **kw: Any) -> OutboundMessage:
    return OutboundMessage(address, text, "turn", 0, **kw)


async def test_markdown_refused_falls_back_to_mrkdwn(
    make_channel: Factory, fake_slack: FakeSlack
) -> None:
    channel, _, _ = await make_channel("socket")
    fake_slack.fail_next("chat.postMessage", "invalid_arguments")
    address = Address("slack", "C1", thread_id="7.000100")
    await channel.deliver(out(address, "**bold** [x](https://x.io)\n```py\nx = 1\n```"))
    await channel.deliver(out(address, "second **one**"))
    first, retried, second = fake_slack.calls_to("chat.postMessage")
    assert "markdown_text" in first and "text" not in first
    assert retried["text"] == "*bold* <https://x.io|x>\n```\nx = 1\n```"
    assert second["text"] == "second *one*" and retried["thread_ts"] == "7.000100"


async def test_failed_posts_are_classified_for_the_outbox_not_retried(
    make_channel: Factory, fake_slack: FakeSlack
) -> None:
    channel, _, _ = await make_channel("socket")
    cases = [
        ("ratelimited", 429, 30, SendFailureKind.RETRY_AFTER),
        ("internal_error", 500, None, SendFailureKind.TRANSIENT),
        ("channel_not_found", 200, None, SendFailureKind.PERMANENT),
    ]
    for error, status, retry_after, kind in cases:
        fake_slack.fail_next("chat.postMessage", error, status=status, retry_after=retry_after)
        with pytest.raises(SendFailure) as failure:
            await channel.deliver(out(Address("slack", "D1"), "hi"))
        assert failure.value.kind == kind
        if retry_after:
            assert failure.value.retry_after == retry_after
    assert len(fake_slack.calls_to("chat.postMessage")) == len(cases)
    assert fake_slack.posted_texts("D1") == []


async def test_a_post_whose_outcome_is_unknown_is_found_by_its_chunk_id(
    make_channel: Factory, fake_slack: FakeSlack
) -> None:
    channel, _, _ = await make_channel("socket")
    for address in (Address("slack", "C1"), Address("slack", "C1", thread_id="5.000100")):
        sent = out(address, "hi", chunk_id="turn-1/0")
        assert await channel.find_sent(sent) is None
        ts = await channel.deliver(sent)
        assert await channel.find_sent(sent) == ts
        assert await channel.find_sent(out(address, "hi", chunk_id="turn-1/1")) is None


async def test_a_post_unanswered_in_time_is_an_unknown_outcome_then_found(
    make_channel: Factory, fake_slack: FakeSlack
) -> None:
    channel, _, _ = await make_channel("socket", timeouts={"read": 1.0})
    sent = out(Address("slack", "C2"), "slow post", chunk_id="turn-2/0")
    fake_slack.answer_late("chat.postMessage", 2.5)
    with pytest.raises(SendFailure) as failure:
        await channel.deliver(sent)
    assert failure.value.kind == SendFailureKind.UNKNOWN  # looked up, not repeated blindly
    assert fake_slack.posted_texts("C2") == ["slow post"]
    assert await channel.find_sent(sent) is not None
    assert len(fake_slack.calls_to("chat.postMessage")) == 1


async def test_stream_unavailable_falls_back_to_post_and_update(
    make_channel: Factory, fake_slack: FakeSlack
) -> None:
    channel, _, _ = await make_channel("socket")
    fake_slack.fail_next("chat.startStream", "missing_scope")
    address = Address("slack", "D1", thread_id="8.000100")
    ts = await channel.deliver(out(address, "Hel", final=False))
    ts2 = await channel.deliver(out(address, "Hello", final=False, edit_of=ts))
    ts3 = await channel.deliver(out(address, "Hello!", edit_of=ts))
    assert ts == ts2 == ts3
    assert [p["markdown_text"] for p in fake_slack.calls_to("chat.update")] == ["Hello", "Hello!"]
    # Native streaming stays off for the rest of the run.
    await channel.deliver(out(address, "again", final=False))
    assert len(fake_slack.calls_to("chat.startStream")) == 1


async def test_stream_whose_final_text_diverges_is_rewritten(
    make_channel: Factory, fake_slack: FakeSlack
) -> None:
    channel, _, _ = await make_channel("socket")
    address = Address("slack", "D1", thread_id="9.000100")
    ts = await channel.deliver(out(address, "Draft one", final=False))
    await channel.deliver(out(address, "Draft one two", final=False, edit_of=ts))
    await channel.deliver(out(address, "Something else", edit_of=ts))
    assert [p["markdown_text"] for p in fake_slack.calls_to("chat.appendStream")] == [" two"]
    assert fake_slack.calls_to("chat.stopStream")[0].get("markdown_text") is None
    assert fake_slack.message_texts("D1") == ["Something else"]


async def test_channel_stream_needs_a_recipient(
    make_channel: Factory, fake_slack: FakeSlack
) -> None:
    channel, _, _ = await make_channel("socket")
    address = Address("slack", "C1", thread_id="10.000100")
    await channel.deliver(out(address, "partial", final=False))
    assert fake_slack.calls_to("chat.startStream") == []  # nobody known to stream to
    assert fake_slack.posted_texts("C1") == ["partial"]


async def test_final_edit_of_a_vanished_preview_posts_anew(
    make_channel: Factory, fake_slack: FakeSlack
) -> None:
    channel, _, _ = await make_channel("socket")
    address = Address("slack", "D1")
    ts = await channel.deliver(out(address, "final words", edit_of="1.999999"))
    assert ts != "1.999999" and fake_slack.posted_texts("D1") == ["final words"]


async def test_typing_reaction_and_thread_status(
    make_channel: Factory, fake_slack: FakeSlack
) -> None:
    channel, _, _ = await make_channel("socket")
    dm = Address("slack", "D1", reply_to="11.000100")
    await channel.typing(dm)
    await channel.typing(dm)  # a second pulse adds nothing
    assert fake_slack.reactions == {("D1", "11.000100", "eyes")}
    await channel.done_typing(dm)
    assert fake_slack.reactions == set()

    thread = Address("slack", "C1", thread_id="12.000100", reply_to="12.000200")
    await channel.typing(thread)
    await channel.done_typing(thread)
    statuses = [p["status"] for p in fake_slack.calls_to("assistant.threads.setStatus")]
    assert statuses == [THINKING_STATUS, ""]

    fake_slack.fail_next("assistant.threads.setStatus", "missing_scope")
    other = Address("slack", "C2", thread_id="13.000100", reply_to="13.000200")
    await channel.typing(other)
    assert ("C2", "13.000200", "eyes") in fake_slack.reactions
    await channel.typing(Address("slack", "C3", thread_id="14.000100", reply_to="14.000200"))
    assert len(fake_slack.calls_to("assistant.threads.setStatus")) == 3  # off everywhere now


# --- slash commands ------------------------------------------------------------------------


async def test_done_reaction_replaces_the_acknowledgement(
    make_channel: Factory, fake_slack: FakeSlack
) -> None:
    channel, _, _ = await make_channel("socket", ack_reaction=":eyes:", done_reaction="+1")
    dm = Address("slack", "D1", reply_to="21.000100")
    await channel.typing(dm)
    assert fake_slack.reactions == {("D1", "21.000100", "eyes")}
    await channel.done_typing(dm)
    assert fake_slack.reactions == {("D1", "21.000100", "+1")}


def test_slack_reaction_names_are_checked() -> None:
    with pytest.raises(ValueError, match="not a Slack emoji name"):
        SlackConfig(ack_reaction="👀")
    assert SlackConfig(done_reaction=":white_check_mark:").done_reaction == "white_check_mark"


async def test_slash_command_replies_ephemerally(
    make_channel: Factory, fake_slack: FakeSlack
) -> None:
    channel, core, url = await make_channel("http")

    async def reply(msg: InboundMessage) -> None:
        await channel.deliver(out(msg.address, f"**ran** {msg.text}"))

    core.on_accept = reply
    secret = fake_slack.signing_secret
    status, body = await post_event(None, url, fake_slack.slash_command(text="status"), secret)
    assert status == 200 and body == ""
    await until(lambda: fake_slack.response_url_posts)
    (msg,) = core.accepted
    assert msg.text == "/status" and msg.is_command_surface and msg.address.private_to == "U1"
    assert fake_slack.response_url_posts[0][1] == {
        "text": "*ran* /status",
        "response_type": "ephemeral",
    }

    status, body = await post_event(None, url, fake_slack.slash_command(text="dance"), secret)
    assert status == 200 and "Unknown command" in body and "/krill help" in body
    assert len(core.accepted) == 1

    # Without a usable response_url the answer goes through chat.postEphemeral.
    await channel.deliver(out(Address("slack", "C9", private_to="U4"), "just for you"))
    (ephemeral,) = fake_slack.calls_to("chat.postEphemeral")
    assert (ephemeral["channel"], ephemeral["user"]) == ("C9", "U4")


async def test_slash_command_where_krill_is_off(
    make_channel: Factory, fake_slack: FakeSlack
) -> None:
    _, core, _ = await make_channel("socket")
    core.result = AcceptResult.IGNORED
    envelope = await fake_slack.push_socket_slash_command(fake_slack.slash_command(text="help"))
    await fake_slack.wait_for_ack(envelope)
    await until(lambda: fake_slack.response_url_posts)
    assert "not enabled" in fake_slack.response_url_posts[0][1]["text"]


# --- connection ----------------------------------------------------------------------------


async def test_socket_reconnects_after_refresh_and_after_a_dropped_connection(
    make_channel: Factory, fake_slack: FakeSlack
) -> None:
    _, core, _ = await make_channel("socket")
    await fake_slack.wait_for_socket(1)
    await fake_slack.disconnect_socket()  # Slack's "please reconnect"
    await fake_slack.wait_for_socket(2)
    for ws in list(fake_slack._sockets):  # the network drops the connection
        await ws.close()
    await fake_slack.wait_for_socket(3, timeout=10)
    envelope = await fake_slack.push_socket_event(fake_slack.im_message("U1", "still here?"))
    await fake_slack.wait_for_ack(envelope)
    assert [m.text for m in core.accepted] == ["still here?"]
    assert len(fake_slack.calls_to("apps.connections.open")) == 3


async def test_a_lost_socket_is_retrying_since_it_was_lost_until_it_is_back(
    make_channel: Factory, fake_slack: FakeSlack
) -> None:
    """What /healthz and the console's Health page say while Socket Mode reconnects."""
    channel, _, _ = await make_channel("socket")
    await fake_slack.wait_for_socket(1)
    assert channel.failing_since is None
    fake_slack.fail_next("apps.connections.open", "internal_error", times=2)
    lost_at = time.time()
    for ws in list(fake_slack._sockets):  # the network drops the connection
        await ws.close()
    await until(lambda: channel.failing_since is not None)
    assert lost_at <= (channel.failing_since or 0) <= time.time()
    assert channel_health(channel, up=True) == RETRYING and channel.healthy
    await fake_slack.wait_for_socket(2, timeout=15)
    await until(lambda: channel.failing_since is None)
    assert channel_health(channel, up=True) is True


async def test_refused_tokens_stop_start_up(make_channel: Factory) -> None:
    with pytest.raises(SlackSetupError, match=r"slack\.bot_token"):
        await make_channel("http", bot_token="xoxb-wrong")
    with pytest.raises(SlackSetupError, match=r"slack\.app_token"):
        await make_channel("socket", app_token="xapp-wrong")


# --- sources -------------------------------------------------------------------------------

SOURCES = (
    Source("What's New <3.14>", "https://docs.python.org/3.14/whatsnew/"),
    Source("a|b", "https://peps.python.org/pep-0750/"),
)
CONTEXT = {
    "type": "context",
    "elements": [
        {"type": "mrkdwn", "text": "*Sources:*"},
        {
            "type": "mrkdwn",
            "text": "<https://docs.python.org/3.14/whatsnew/|What's New &lt;3.14&gt;>",
        },
        {"type": "mrkdwn", "text": "<https://peps.python.org/pep-0750/|a¦b>"},
    ],
}


async def test_sources_are_a_context_block_under_the_reply(
    make_channel: Factory, fake_slack: FakeSlack
) -> None:
    channel, _, _ = await make_channel("socket")
    address = Address("slack", "C1", thread_id="12.000100")
    await channel.deliver(out(address, "**Template** strings.", sources=SOURCES))
    (post,) = fake_slack.calls_to("chat.postMessage")
    # Slack takes markdown_text only alone, so the text rides in a markdown block.
    assert "markdown_text" not in post
    assert post["blocks"] == [{"type": "markdown", "text": "**Template** strings."}, CONTEXT]
    assert post["text"] == "*Template* strings."  # what notifications show
    assert post["thread_ts"] == "12.000100"


async def test_sources_close_a_stream_and_join_an_edit(
    make_channel: Factory, fake_slack: FakeSlack
) -> None:
    channel, _, _ = await make_channel("socket")
    address = Address("slack", "D1", thread_id="13.000100")
    ts = await channel.deliver(out(address, "Draft", final=False))
    await channel.deliver(out(address, "Draft done.", edit_of=ts, sources=SOURCES))
    (stop,) = fake_slack.calls_to("chat.stopStream")
    assert stop["markdown_text"] == " done." and stop["blocks"] == [CONTEXT]
    fake_slack.fail_next("chat.startStream", "missing_scope")
    ts = await channel.deliver(out(address, "Hel", final=False))
    await channel.deliver(out(address, "Hello.", edit_of=ts, sources=SOURCES))
    final = fake_slack.calls_to("chat.update")[-1]
    assert final["blocks"][-1] == CONTEXT and "markdown_text" not in final


async def test_sources_become_a_mrkdwn_line_where_markdown_is_refused(
    make_channel: Factory, fake_slack: FakeSlack
) -> None:
    channel, _, _ = await make_channel("socket")
    fake_slack.fail_next("chat.postMessage", "invalid_blocks")
    await channel.deliver(out(Address("slack", "C2"), "Answer.", sources=SOURCES[1:]))
    _, retried = fake_slack.calls_to("chat.postMessage")
    assert "blocks" not in retried
    assert retried["text"] == "Answer.\n\n*Sources:* <https://peps.python.org/pep-0750/|a¦b>"
