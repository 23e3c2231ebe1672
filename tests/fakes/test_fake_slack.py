"""Tests of the Slack fake, driven by the real slack-sdk and slack-bolt clients."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

from tests.fakes.slack import FakeSlack, im_message, post_event, sign, slash_command


def make_app(fake: FakeSlack) -> AsyncApp:
    return AsyncApp(client=fake.web_client(), signing_secret=fake.signing_secret)


@pytest.fixture
async def socket_app(fake_slack: FakeSlack) -> AsyncIterator[tuple[AsyncApp, list[dict[str, Any]]]]:
    app = make_app(fake_slack)
    seen: list[dict[str, Any]] = []

    @app.event("message")
    async def on_message(event: dict[str, Any], say: Any) -> None:
        seen.append(event)
        if event.get("text") == "echo":
            await say(text="echoed", thread_ts=event["ts"])

    @app.command("/krill")
    async def on_command(ack: Any, command: dict[str, Any]) -> None:
        await ack(f"got {command['text']}")

    handler = AsyncSocketModeHandler(app, fake_slack.app_token)
    await handler.connect_async()
    try:
        yield app, seen
    finally:
        await handler.close_async()


async def wait_until(predicate: Any, within: float = 5.0) -> None:
    deadline = time.monotonic() + within
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


async def test_post_and_update_message(fake_slack: FakeSlack) -> None:
    client = AsyncWebClient(token=fake_slack.bot_token, base_url=fake_slack.api_url)
    posted = await client.chat_postMessage(channel="C1", text="hello", thread_ts="1.000100")
    assert posted["ok"] and posted["channel"] == "C1"
    assert posted["message"]["user"] == "UBOT" and posted["message"]["bot_id"] == "BBOT"
    assert posted["message"]["thread_ts"] == "1.000100"

    second = await client.chat_postMessage(channel="C1", markdown_text="**second**")
    assert float(second["ts"]) > float(posted["ts"])
    assert fake_slack.posted_texts() == ["hello", "**second**"]
    assert fake_slack.posted_texts("C2") == []

    updated = await client.chat_update(channel="C1", ts=posted["ts"], text="hello, edited")
    assert updated["text"] == "hello, edited"
    assert fake_slack.calls_to("chat.update")[0]["ts"] == posted["ts"]
    assert "hello, edited" in fake_slack.message_texts("C1")

    with pytest.raises(SlackApiError) as info:
        await client.chat_update(channel="C1", ts="9.000000", text="x")
    assert info.value.response["error"] == "message_not_found"

    await client.chat_delete(channel="C1", ts=second["ts"])
    assert fake_slack.message_texts("C1") == ["hello, edited"]


async def test_auth_and_unknown_method(fake_slack: FakeSlack) -> None:
    me = await fake_slack.web_client().auth_test()
    assert (me["user_id"], me["bot_id"], me["team_id"]) == ("UBOT", "BBOT", "T1")

    with pytest.raises(SlackApiError) as info:
        await fake_slack.web_client("xoxb-wrong").auth_test()
    assert info.value.response["error"] == "invalid_auth"

    with pytest.raises(SlackApiError) as info:
        await fake_slack.web_client().apps_connections_open(app_token="xoxb-test")
    assert info.value.response["error"] == "invalid_auth"

    with pytest.raises(SlackApiError) as info:
        await fake_slack.web_client().api_call("nope.nothing")
    assert info.value.response["error"] == "unknown_method"


async def test_params_from_query_form_and_json(fake_slack: FakeSlack) -> None:
    client = fake_slack.web_client()
    await client.reactions_add(channel="C1", timestamp="1.000200", name="eyes")  # query string
    await client.assistant_threads_setStatus(channel_id="D1", thread_ts="1.0", status="thinking")
    await client.api_call("chat.postEphemeral", data={"channel": "C1", "user": "U1", "text": "x"})
    assert fake_slack.calls_to("reactions.add") == [
        {"channel": "C1", "timestamp": "1.000200", "name": "eyes"}
    ]
    assert fake_slack.calls_to("assistant.threads.setStatus")[0]["status"] == "thinking"
    assert fake_slack.calls_to("chat.postEphemeral")[0]["user"] == "U1"
    assert ("C1", "1.000200", "eyes") in fake_slack.reactions

    with pytest.raises(SlackApiError) as info:
        await client.reactions_add(channel="C1", timestamp="1.000200", name="eyes")
    assert info.value.response["error"] == "already_reacted"
    await client.reactions_remove(channel="C1", timestamp="1.000200", name="eyes")
    assert not fake_slack.reactions


async def test_ratelimited_and_retry(fake_slack: FakeSlack) -> None:
    client = fake_slack.web_client()
    fake_slack.fail_next("chat.postMessage", status=429, retry_after=7)
    with pytest.raises(SlackApiError) as info:
        await client.chat_postMessage(channel="C1", text="hi")
    assert info.value.response["error"] == "ratelimited"
    assert info.value.response.status_code == 429
    assert info.value.response.headers["Retry-After"] in ("7", ["7"])
    assert fake_slack.posted_texts() == []

    fake_slack.fail_next("chat.postMessage", "channel_not_found")
    with pytest.raises(SlackApiError) as info:
        await client.chat_postMessage(channel="C1", text="hi")
    assert info.value.response["error"] == "channel_not_found"

    retrying = AsyncWebClient(
        token=fake_slack.bot_token,
        base_url=fake_slack.api_url,
        retry_handlers=[AsyncRateLimitErrorRetryHandler(max_retry_count=2)],
    )
    fake_slack.fail_next("chat.postMessage", status=429, retry_after=0, times=2)
    await retrying.chat_postMessage(channel="C1", text="finally")
    assert fake_slack.posted_texts() == ["finally"]
    assert len(fake_slack.calls_to("chat.postMessage")) == 2 + 3


async def test_threads_and_lookups(fake_slack: FakeSlack) -> None:
    client = fake_slack.web_client()
    fake_slack.set_thread(
        "C1",
        "1.000001",
        [{"user": "U1", "text": "question", "ts": "1.000001"}],
    )
    await client.chat_postMessage(channel="C1", text="answer", thread_ts="1.000001")
    replies = await client.conversations_replies(channel="C1", ts="1.000001")
    assert [m["text"] for m in replies["messages"]] == ["question", "answer"]

    page = await client.conversations_replies(channel="C1", ts="1.000001", limit=1)
    assert page["has_more"] and len(page["messages"]) == 1

    # Without a script, a thread holds what the fake saw: pushed events and posts.
    event = fake_slack.channel_message("C2", "U1", "hi")
    fake_slack.record_event(event)
    parent = event["event"]["ts"]
    await client.chat_postMessage(channel="C2", text="hello", thread_ts=parent)
    replies = await client.conversations_replies(channel="C2", ts=parent)
    assert [m["text"] for m in replies["messages"]] == ["hi", "hello"]

    info = await client.conversations_info(channel="D1")
    assert info["channel"]["is_im"]
    fake_slack.set_user("U7", real_name="Ada Lovelace")
    user = await client.users_info(user="U7")
    assert user["user"]["real_name"] == "Ada Lovelace"
    assert user["user"]["profile"]["real_name"] == "Ada Lovelace"


async def test_streaming(fake_slack: FakeSlack) -> None:
    client = fake_slack.web_client()
    streamer = await client.chat_stream(channel="D1", thread_ts="1.000001", buffer_size=4)
    await streamer.append(markdown_text="Hello ")
    await streamer.append(markdown_text="world")
    await streamer.stop(markdown_text="!")
    assert fake_slack.stream_text() == "Hello world!"
    assert [m for m, _ in fake_slack.calls if m.startswith("chat.")] == [
        "chat.startStream",
        "chat.appendStream",
        "chat.stopStream",
    ]
    assert fake_slack.message_texts("D1") == ["Hello world!"]
    with pytest.raises(SlackApiError) as info:
        ts = fake_slack.calls_to("chat.stopStream")[0]["ts"]
        await client.chat_appendStream(channel="D1", ts=ts, markdown_text="x")
    assert info.value.response["error"] == "message_not_in_streaming_state"


async def test_wait_for_times_out_with_dump(fake_slack: FakeSlack) -> None:
    await fake_slack.web_client().auth_test()
    with pytest.raises(AssertionError, match=r"(?s)chat.postMessage.*auth.test"):
        await fake_slack.wait_for("chat.postMessage", timeout=0.1)


async def test_socket_mode_event_ack_and_reply(
    fake_slack: FakeSlack, socket_app: tuple[AsyncApp, list[dict[str, Any]]]
) -> None:
    _, seen = socket_app
    envelope_id = await fake_slack.push_socket_event(fake_slack.im_message("U1", "echo"))
    ack = await fake_slack.wait_for_ack(envelope_id)
    assert ack["envelope_id"] == envelope_id
    posts = await fake_slack.wait_for("chat.postMessage")
    assert posts[0]["text"] == "echoed" and posts[0]["channel"] == "D1"
    assert seen[0]["text"] == "echo"
    assert fake_slack.calls_to("auth.test"), "Bolt authorizes via auth.test"
    assert fake_slack.socket_connections == 1

    # Bolt's self-event filter drops the bot's own messages, but still acks them.
    own = fake_slack.bot_message("C1", "mine", bot_id=fake_slack.bot_id)
    await fake_slack.wait_for_ack(await fake_slack.push_socket_event(own))
    # Events are dispatched in order: once a later message is seen, the own one had its turn.
    await fake_slack.push_socket_event(fake_slack.im_message("U1", "sentinel"))
    await wait_until(lambda: len(seen) > 1)
    assert [e["text"] for e in seen] == ["echo", "sentinel"]


async def test_socket_mode_slash_command(
    fake_slack: FakeSlack, socket_app: tuple[AsyncApp, list[dict[str, Any]]]
) -> None:
    envelope_id = await fake_slack.push_socket_slash_command(fake_slack.slash_command(text="ping"))
    ack = await fake_slack.wait_for_ack(envelope_id)
    assert ack["payload"] == {"text": "got ping"}


async def test_socket_mode_reconnects_after_disconnect(
    fake_slack: FakeSlack, socket_app: tuple[AsyncApp, list[dict[str, Any]]]
) -> None:
    _, seen = socket_app
    await fake_slack.disconnect_socket()
    await fake_slack.wait_for_socket(connections=2)
    assert len(fake_slack.calls_to("apps.connections.open")) == 2
    envelope_id = await fake_slack.push_socket_event(fake_slack.im_message("U1", "after"))
    await fake_slack.wait_for_ack(envelope_id)
    await wait_until(lambda: [e["text"] for e in seen] == ["after"])


async def test_push_without_client_fails(fake_slack: FakeSlack) -> None:
    with pytest.raises(AssertionError, match="no Socket Mode client"):
        await fake_slack.push_socket_event(fake_slack.im_message("U1", "hi"), timeout=0.1)


@pytest.fixture
async def http_app(fake_slack: FakeSlack) -> AsyncIterator[tuple[str, list[dict[str, Any]]]]:
    app = make_app(fake_slack)
    seen: list[dict[str, Any]] = []

    @app.event("message")
    async def on_message(event: dict[str, Any]) -> None:
        seen.append(event)

    @app.command("/krill")
    async def on_command(ack: Any, command: dict[str, Any]) -> None:
        await ack(f"got {command['text']}")

    async def events(request: web.Request) -> web.Response:
        return await to_aiohttp_response(await app.async_dispatch(await to_bolt_request(request)))

    web_app = web.Application()
    web_app.router.add_post("/slack/events", events)
    runner = web.AppRunner(web_app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    try:
        yield f"http://{host}:{port}", seen
    finally:
        await runner.cleanup()


async def test_http_signed_event_accepted_and_forged_rejected(
    fake_slack: FakeSlack, http_app: tuple[str, list[dict[str, Any]]]
) -> None:
    base, seen = http_app
    secret = fake_slack.signing_secret
    status, _ = await post_event(base, "/slack/events", im_message("U1", "over http"), secret)
    assert status == 200
    await wait_until(lambda: [e["text"] for e in seen] == ["over http"])

    status, _ = await post_event(base, "/slack/events", im_message("U1", "x"), secret, forge=True)
    assert status == 401
    old = int(time.time()) - 600
    status, _ = await post_event(
        base, "/slack/events", im_message("U1", "x"), secret, timestamp=old
    )
    assert status == 401

    async with aiohttp.ClientSession() as session:
        challenge = fake_slack.url_verification("abc")
        status, text = await post_event(session, f"{base}/slack/events", challenge, secret)
        assert status == 200 and json.loads(text) == {"challenge": "abc"}
        status, text = await post_event(
            session, f"{base}/slack/events", slash_command(text="hi"), secret
        )
        assert (status, text) == (200, "got hi")
    assert [e["text"] for e in seen] == ["over http"]


def test_sign_matches_slack_example() -> None:
    # The worked example from Slack's "Verifying requests from Slack" guide.
    body = (
        b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&"
        b"channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&"
        b"command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2F"
        b"commands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&"
        b"trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
    )
    headers = sign("8f742231b10e8888abcd99yyyzzz85a5", body, 1531420618)
    assert headers["X-Slack-Request-Timestamp"] == "1531420618"
    assert headers["X-Slack-Signature"] == (
        "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
    )


async def test_rate_limits_per_channel(fake_slack: FakeSlack) -> None:
    client = fake_slack.web_client()
    flood = fake_slack.enforce_rate_limits()
    await client.chat_postMessage(channel="C1", text="one")
    with pytest.raises(SlackApiError) as info:
        await client.chat_update(channel="C1", ts="1.0", text="too soon")
    assert info.value.response.status_code == 429
    assert info.value.response["error"] == "ratelimited"
    assert info.value.response.headers["Retry-After"] in ("1", ["1"])
    await client.chat_postMessage(channel="C2", text="another channel")
    assert fake_slack.posted_texts() == ["one", "another channel"]
    assert flood.refused == 1


async def test_a_late_answer_comes_after_the_post_is_in_the_channel(
    fake_slack: FakeSlack,
) -> None:
    client = AsyncWebClient(token=fake_slack.bot_token, base_url=fake_slack.api_url)
    fake_slack.answer_late("chat.postMessage", 0.5)
    posting = asyncio.ensure_future(client.chat_postMessage(channel="C9", text="late but there"))
    await fake_slack.wait_for("chat.postMessage")
    await wait_until(lambda: fake_slack.posted_texts("C9") == ["late but there"])
    assert not posting.done()  # carried out, not yet answered
    started = time.monotonic()
    assert (await posting)["ok"]
    assert time.monotonic() - started > 0.3


async def test_actions_blocks_are_checked_like_slack_and_pressed(fake_slack: FakeSlack) -> None:
    client = fake_slack.web_client()

    def button(label: str, action_id: str) -> dict:
        text = {"type": "plain_text", "text": label}
        return {"type": "button", "text": text, "action_id": action_id, "value": "v"}

    def actions(*buttons: dict) -> list[dict]:
        return [{"type": "actions", "elements": list(buttons)}]

    posted = await client.chat_postMessage(
        channel="C1", text="Sure?", blocks=actions(button("Yes", "a"), button("No", "b"))
    )
    assert fake_slack.buttons("C1") == ["Yes", "No"]
    press = fake_slack.press("C1", "U1", "No")
    assert press["type"] == "block_actions" and press["container"]["message_ts"] == posted["ts"]
    assert press["actions"][0]["action_id"] == "b" and press["user"]["id"] == "U1"
    for bad in (
        actions(button("x" * 76, "a")),  # a label over 75 characters
        actions(button("Yes", "a"), button("No", "a")),  # one action id twice
        actions(*(button(str(i), str(i)) for i in range(26))),  # more than 25 elements
        [{"type": "section", "text": {"type": "mrkdwn", "text": "x" * 3001}}],
    ):
        with pytest.raises(SlackApiError) as info:
            await client.chat_postMessage(channel="C1", text="t", blocks=bad)
        assert info.value.response["error"] == "invalid_blocks"
    await client.chat_update(channel="C1", ts=posted["ts"], text="Sure? No.", blocks=[])
    assert fake_slack.buttons("C1", posted["ts"]) == []


async def test_lookups_need_their_read_scope(fake_slack: FakeSlack) -> None:
    client = fake_slack.web_client()
    fake_slack.set_user("U1", profile={"display_name": "Ada"})
    fake_slack.set_channel("C1", name="ops")
    assert (await client.users_info(user="U1"))["user"]["profile"]["display_name"] == "Ada"
    assert (await client.conversations_info(channel="C1"))["channel"]["name"] == "ops"
    fake_slack.revoke_scope("users:read")
    fake_slack.revoke_scope("groups:read")
    with pytest.raises(SlackApiError) as refused:
        await client.users_info(user="U1")
    assert refused.value.response["error"] == "missing_scope"
    assert refused.value.response["needed"] == "users:read"
    assert "users:read" not in refused.value.response["provided"].split(",")
    with pytest.raises(SlackApiError) as private:
        await client.conversations_info(channel="G1")
    assert private.value.response["needed"] == "groups:read"
    assert (await client.conversations_info(channel="C1"))["ok"]  # channels:read stays
