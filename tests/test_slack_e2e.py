"""End to end: the real `krill run` process with the Slack channel, driven through the fake
Slack (signed Events API requests and Socket Mode envelopes) and answered by the fake model."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.slack import FakeSlack, new_ts, post_event
from tests.krill_process import KrillProcess, run_cli
from tests.paced_replies import assert_complete_and_in_order, is_last_part, long_replies

Starter = Callable[..., Any]


async def until(check: Callable[[], object], within: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


def words(body: dict[str, Any]) -> str:
    """The model's view of the last user turn, flattened to one string."""
    content = body["messages"][-1]["content"]
    return content if isinstance(content, str) else "".join(b.get("text", "") for b in content)


class SlackKrill:
    """A running `krill run` with Slack enabled, and helpers to talk to it like Slack does."""

    def __init__(self, krill: KrillProcess, fake: FakeSlack, mode: str):
        self.krill = krill
        self.fake = fake
        self.mode = mode

    @property
    def events_url(self) -> str:
        return f"{self.krill.url}/slack/events"

    async def send(self, payload: dict[str, Any], **kw: Any) -> int:
        """Deliver an event the way the configured mode does; returns the HTTP status
        (200 for an acknowledged Socket Mode envelope)."""
        if self.mode == "socket":
            envelope = await self.fake.push_socket_event(payload)
            await self.fake.wait_for_ack(envelope)
            return 200
        self.fake.record_event(payload)
        status, _ = await post_event(None, self.events_url, payload, self.fake.signing_secret, **kw)
        return status

    async def command(self, text: str, **fields: str) -> None:
        payload = self.fake.slash_command(text=text, **fields)
        if self.mode == "socket":
            envelope = await self.fake.push_socket_slash_command(payload)
            await self.fake.wait_for_ack(envelope)
            return
        status, _ = await post_event(None, self.events_url, payload, self.fake.signing_secret)
        assert status == 200

    async def replies(self, count: int = 1, channel: str | None = None) -> list[dict[str, Any]]:
        return await self.fake.wait_for(
            "chat.postMessage",
            count,
            timeout=10,
            predicate=(lambda p: p.get("channel") == channel) if channel else None,
        )

    async def settle(self, sentinel: dict[str, Any]) -> None:
        """Send `sentinel` and wait for its answer. Events are recorded before they are
        acknowledged and a session's turns run in order, so once a later message in the same
        session is answered, everything sent there before it was handled."""
        text = sentinel["event"]["text"]
        assert await self.send(sentinel) == 200
        await self.fake.wait_for(
            "chat.postMessage", timeout=10, predicate=lambda p: text in p.get("markdown_text", "")
        )

    async def inbound(self, result: str) -> float:
        """How many Slack messages the core has decided `result` for (`/metrics`)."""
        async with (
            aiohttp.ClientSession() as http,
            http.get(f"{self.krill.url}/metrics") as resp,
        ):
            text = await resp.text()
        return sum(
            sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
            if sample.name == "krill_inbound_total"
            and sample.labels == {"channel": "slack", "result": result}
        )


@pytest.fixture
async def start_slack(
    tmp_path: Path, fake_slack: FakeSlack, fake_anthropic: FakeAnthropic
) -> AsyncIterator[Starter]:
    running: list[KrillProcess] = []

    async def start(mode: str = "http", *, config: dict[str, Any] | None = None, **slack: Any):
        settings = {
            "enabled": True,
            "bot_token": fake_slack.bot_token,
            "app_token": fake_slack.app_token,
            "signing_secret": fake_slack.signing_secret,
            "mode": mode,
            "api_base_url": fake_slack.api_url,
            "dm_policy": "open",
            "stream_interval": 0,
            **slack,
        }
        env = {"ANTHROPIC_API_KEY": "test", "ANTHROPIC_BASE_URL": fake_anthropic.url}
        krill = KrillProcess(tmp_path, {"slack": settings, **(config or {})}, env)
        running.append(krill)
        await krill.start()
        if mode == "socket":
            await fake_slack.wait_for_socket()
        return SlackKrill(krill, fake_slack, mode)

    yield start
    for krill in running:
        await krill.stop()


@pytest.mark.parametrize("mode", ["http", "socket"])
async def test_dm_is_answered_once_and_retries_are_deduped(
    start_slack: Starter, fake_slack: FakeSlack, fake_anthropic: FakeAnthropic, mode: str
) -> None:
    slack = await start_slack(mode)
    event = fake_slack.im_message("U1", "hello krill", channel="D1")
    assert await slack.send(event) == 200
    (reply,) = await slack.replies(1, "D1")
    assert "hello krill" in reply["markdown_text"] and "thread_ts" not in reply
    # The typing reaction went on the DM and came off again.
    assert fake_slack.calls_to("reactions.add")[0]["name"] == "eyes"
    await fake_slack.wait_for("reactions.remove")
    assert not fake_slack.reactions
    if mode == "http":
        assert await slack.send(event, retry_num=1) == 200
    else:
        assert await slack.send(event) == 200  # Socket Mode redelivery, same post
    await slack.settle(fake_slack.im_message("U1", "sentinel", channel="D1"))
    seen = [words(r.body) for r in fake_anthropic.message_requests]
    assert len(seen) == 2 and sum("hello krill" in w for w in seen) == 1
    assert len(fake_slack.calls_to("chat.postMessage")) == 2  # the answer and the sentinel's


@pytest.mark.parametrize("mode", ["http", "socket"])
async def test_channel_mention_threads_and_buffered_context(
    start_slack: Starter, fake_slack: FakeSlack, fake_anthropic: FakeAnthropic, mode: str
) -> None:
    slack = await start_slack(mode)
    chatter = fake_slack.channel_message("C1", "U2", "the deploy is at 5pm")
    assert await slack.send(chatter) == 200
    assert await slack.inbound("buffered") == 1  # decided before the ack: no turn follows
    assert fake_anthropic.message_requests == []  # unmentioned: kept as context only

    mention = fake_slack.app_mention("C1", "U1", "when is the deploy?")
    root_ts = mention["event"]["ts"]
    # Slack sends the same post as app_mention and as message.channels.
    twin = fake_slack.channel_message("C1", "U1", mention["event"]["text"], ts=root_ts)
    assert await slack.send(mention) == 200
    assert await slack.send(twin) == 200
    (reply,) = await slack.replies(1, "C1")
    assert reply["thread_ts"] == root_ts  # answered in a thread under the mention
    seen = words(fake_anthropic.message_requests[0].body)
    assert "when is the deploy?" in seen and "the deploy is at 5pm" in seen
    assert "<@UBOT>" not in seen
    # The thread's status said "is thinking…" while the turn ran.
    status = fake_slack.calls_to("assistant.threads.setStatus")[0]
    assert (status["channel_id"], status["thread_ts"]) == ("C1", root_ts)

    # A reply in that thread needs no mention: Krill takes part in it.
    follow = fake_slack.channel_message("C1", "U1", "and the rollback?", thread_ts=root_ts)
    assert await slack.send(follow) == 200
    await slack.replies(2, "C1")
    second = fake_anthropic.message_requests[1].body
    assert len(second["messages"]) == 3  # root turn, its answer, the follow-up
    await slack.settle(fake_slack.channel_message("C1", "U1", "sentinel", thread_ts=root_ts))
    assert len(fake_anthropic.message_requests) == 3  # the follow-up made one turn
    last = fake_anthropic.message_requests[2].body
    assert len(last["messages"]) == 5 and "rollback" not in words(last)


async def test_thread_sessions_are_isolated_and_seeded_from_slack(
    start_slack: Starter, fake_slack: FakeSlack, fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    slack = await start_slack("http", channels={"C2": {"history_limit": 1}})
    first = fake_slack.app_mention("C1", "U1", "topic one")
    second = fake_slack.app_mention("C1", "U2", "topic two")
    await slack.send(first)
    await slack.send(second)
    await slack.replies(2, "C1")
    again = fake_slack.app_mention("C1", "U1", "more on one", thread_ts=first["event"]["ts"])
    await slack.send(again)
    await slack.replies(3, "C1")
    third = fake_anthropic.message_requests[2].body
    assert "topic one" in json.dumps(third) and "topic two" not in json.dumps(third)
    # Krill's own thread is not read on the way in; called again there, it reads only what
    # was posted since its first look.
    (reread,) = fake_slack.calls_to("conversations.replies")
    assert (reread["ts"], reread["oldest"]) == (first["event"]["ts"], first["event"]["ts"])

    # Called into a thread it was not part of, Krill reads the thread first.
    root = "1700000000.000100"
    fake_slack.set_user("U7", real_name="Ann Lee", name="ann")
    fake_slack.set_thread(
        "C2",
        root,
        [
            {"ts": root, "user": "U7", "text": "the build is red since Tuesday"},
            {"ts": "1700000000.000200", "user": "U8", "text": "flaky test in <#C9|ci>?"},
        ],
    )
    chatter = fake_slack.channel_message("C2", "U8", "no idea", thread_ts=root)
    await slack.send(chatter)  # not for Krill: it is not in this thread yet
    mention = fake_slack.app_mention("C2", "U9", "can you summarise?", thread_ts=root)
    await slack.send(mention)
    (reply,) = await slack.replies(1, "C2")
    assert reply["thread_ts"] == root
    seen = words(fake_anthropic.message_requests[3].body)
    assert "ann: the build is red since Tuesday" in seen
    assert "flaky test in #ci?" in seen and "no idea" in seen
    assert len(fake_slack.calls_to("conversations.replies")) == 2
    assert len(fake_anthropic.message_requests) == 4
    # [slack.channels."C2"] history_limit = 1: the next turn sees only itself.
    await slack.send(fake_slack.app_mention("C2", "U9", "and now?", thread_ts=root))
    await slack.replies(2, "C2")
    fifth = fake_anthropic.message_requests[4].body
    assert len(fifth["messages"]) == 1 and "and now?" in words(fifth)

    code, out, err = await run_cli(
        tmp_path, "status", "--json", "--config", str(slack.krill.config_path)
    )
    assert code == 0, err
    turns = {s["session_key"]: s["turns"] for s in json.loads(out)["sessions"]}
    assert turns == {
        f"agent:main:slack:channel:c1:thread:{first['event']['ts']}": 2,
        f"agent:main:slack:channel:c1:thread:{second['event']['ts']}": 1,
        f"agent:main:slack:channel:c2:thread:{root}": 2,
    }


async def test_a_thread_mention_rereads_what_was_said_in_between(
    start_slack: Starter, fake_slack: FakeSlack, fake_anthropic: FakeAnthropic
) -> None:
    slack = await start_slack("http")
    mention = fake_slack.app_mention("C5", "U1", "should we ship on Friday?")
    root = mention["event"]["ts"]
    await slack.send(mention)
    (answer,) = await slack.replies(1, "C5")
    # People talk on in the thread without mentioning Krill (no events reach it) ...
    fake_slack.set_user("U2", real_name="Bea Ray", name="bea")
    fake_slack.set_thread(
        "C5",
        root,
        [
            {
                "ts": new_ts(),
                "user": "U2",
                "text": "QA found a blocker in checkout",
                "thread_ts": root,
            },
            {"ts": new_ts(), "user": "U1", "text": "then Monday it is", "thread_ts": root},
        ],
    )
    # ... and call it back in: the answer is built on what they said meanwhile.
    again = fake_slack.app_mention("C5", "U1", "so what did we decide?", thread_ts=root)
    await slack.send(again)
    await slack.replies(2, "C5")
    seen = words(fake_anthropic.message_requests[-1].body)
    assert "bea: QA found a blocker in checkout" in seen
    assert "then Monday it is" in seen and "so what did we decide?" in seen
    # Neither the first question nor Krill's own answer is repeated as thread context.
    assert "ship on Friday" not in seen and answer["markdown_text"] not in seen


async def test_http_rejects_bad_requests(
    start_slack: Starter, fake_slack: FakeSlack, fake_anthropic: FakeAnthropic
) -> None:
    slack = await start_slack("http", config={"server": {"max_body_bytes": 20_000}})
    url, secret = slack.events_url, fake_slack.signing_secret
    event = fake_slack.im_message("U1", "sneaky")
    status, _ = await post_event(None, url, event, secret, forge=True)
    assert status == 401
    status, _ = await post_event(None, url, event, secret, timestamp=1)
    assert status == 401
    status, _ = await post_event(None, url, None, secret, raw_body=b'{"type": "event_ca')
    assert status == 400
    status, _ = await post_event(None, url, None, secret, raw_body=b"[1, 2]")
    assert status == 400
    big = fake_slack.im_message("U1", "x" * 30_000)
    status, _ = await post_event(None, url, big, secret)
    assert status == 413
    async with aiohttp.ClientSession() as http, http.post(url, data=b"{}") as resp:
        assert resp.status == 401  # unsigned
    challenge = fake_slack.url_verification("abc123")
    status, body = await post_event(None, url, challenge, secret)
    assert status == 200 and json.loads(body)["challenge"] == "abc123"
    unknown = fake_slack.event_callback({"type": "reaction_added", "user": "U1"})
    status, _ = await post_event(None, url, unknown, secret)
    assert status == 200
    await slack.settle(fake_slack.im_message("U1", "sentinel"))
    (request,) = fake_anthropic.message_requests  # the sentinel's turn, nothing before it
    assert "sneaky" not in json.dumps(request.messages)
    assert len(fake_slack.calls_to("chat.postMessage")) == 1


async def test_long_replies_are_chunked_and_streamed(
    start_slack: Starter, fake_slack: FakeSlack, fake_anthropic: FakeAnthropic
) -> None:
    code = "```python\n" + "\n".join(f"print({i})" for i in range(400)) + "\n```"
    text = "\n\n".join(["Intro " + "a" * 5000, code, "Middle " + "b" * 5000, "End."])
    fake_anthropic.queue_text(text)
    slack = await start_slack("http", stream_interval=0.1)
    await slack.send(fake_slack.im_message("U1", "write a lot", channel="D9"))
    await fake_slack.wait_for("chat.postMessage", 3, timeout=10)
    await until(lambda: "\n\n".join(fake_slack.message_texts("D9")) == text)
    chunks = fake_slack.message_texts("D9")
    assert len(chunks) == 3 and all(len(c) <= 8000 for c in chunks)
    assert any(code in c for c in chunks)  # the code block is never cut

    # Streaming: native chat.*Stream in a thread, post-and-update at the top of a DM.
    fake_anthropic.chunk_delay = 0.06  # about 2 s: appends are paced at 1 a second
    long = " ".join(f"word{i}" for i in range(200))
    fake_anthropic.queue_text(long)
    fake_anthropic.queue_text(long)
    mention = fake_slack.app_mention("C1", "U1", "stream please")
    await slack.send(mention)
    await fake_slack.wait_for("chat.stopStream", timeout=10)
    start = fake_slack.calls_to("chat.startStream")[0]
    assert start["thread_ts"] == mention["event"]["ts"]
    assert (start["recipient_user_id"], start["recipient_team_id"]) == ("U1", "T1")
    assert fake_slack.calls_to("chat.appendStream")
    assert fake_slack.stream_text() == long
    assert not [p for p in fake_slack.calls_to("chat.postMessage") if p["channel"] == "C1"]

    await slack.send(fake_slack.im_message("U1", "and in a DM?", channel="D1"))
    (first,) = await slack.replies(1, "D1")
    assert len(first["markdown_text"]) < len(long)
    await fake_slack.wait_for(
        "chat.update", timeout=10, predicate=lambda p: p.get("markdown_text") == long
    )
    assert fake_slack.message_texts("D1") == [long]


@pytest.mark.parametrize("mode", ["http", "socket"])
async def test_refused_user_never_reaches_the_model(
    start_slack: Starter, fake_slack: FakeSlack, fake_anthropic: FakeAnthropic, mode: str
) -> None:
    slack = await start_slack(
        mode,
        dm_policy="allowlist",
        allow_from=["UOK"],
        group_policy="allowlist",
        channels={"CALLOWED": {"allow": True}},
    )
    await slack.send(fake_slack.im_message("UEVE", "secret plan", channel="D2"))
    (refusal,) = await slack.replies(1, "D2")
    assert "not on its list" in refusal["markdown_text"]
    await slack.send(fake_slack.app_mention("COTHER", "UEVE", "secret plan two"))
    await slack.send(fake_slack.im_message("UOK", "allowed words", channel="D3"))
    await slack.replies(1, "D3")
    await slack.send(fake_slack.app_mention("CALLOWED", "UEVE", "channel words"))
    await slack.replies(1, "CALLOWED")
    texts = json.dumps([r.body for r in fake_anthropic.message_requests])
    assert "allowed words" in texts and "channel words" in texts
    assert "secret plan" not in texts
    assert not [p for p in fake_slack.calls_to("chat.postMessage") if p["channel"] == "COTHER"]


async def test_pairing_over_slack(
    start_slack: Starter, fake_slack: FakeSlack, fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    slack = await start_slack("http", dm_policy="pairing")
    await slack.send(fake_slack.im_message("UNEW", "let me in", channel="D4"))
    (reply,) = await slack.replies(1, "D4")
    assert "krill pairing approve slack" in reply["markdown_text"]
    match = re.search(r"pairing code is ([A-Z0-9]{8})", reply["markdown_text"])
    assert match, reply["markdown_text"]
    assert fake_anthropic.message_requests == []
    config = str(slack.krill.config_path)
    code, _, err = await run_cli(
        tmp_path, "pairing", "approve", "slack", match.group(1), "--config", config
    )
    assert code == 0, err
    await slack.send(fake_slack.im_message("UNEW", "thanks, hello", channel="D4"))
    await slack.replies(2, "D4")
    (request,) = fake_anthropic.message_requests
    assert "thanks, hello" in words(request.body) and "let me in" not in words(request.body)


async def test_kill_9_right_after_the_ack_loses_nothing(
    start_slack: Starter, fake_slack: FakeSlack, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.hold()
    slack = await start_slack("http")
    event = fake_slack.im_message("U1", "do not lose me", channel="D1")
    assert await slack.send(event) == 200
    await slack.krill.kill()  # crash before the turn could answer
    fake_anthropic.release()
    restarted = await start_slack("http")
    (reply,) = await restarted.replies(1, "D1")
    assert "do not lose me" in reply["markdown_text"]
    assert await restarted.send(event, retry_num=1) == 200  # Slack's retry: already handled
    await restarted.settle(fake_slack.im_message("U1", "sentinel", channel="D1"))
    posts = [p["markdown_text"] for p in fake_slack.calls_to("chat.postMessage")]
    assert len(posts) == 2 and sum("do not lose me" in p for p in posts) == 1


@pytest.mark.parametrize("mode", ["http", "socket"])
async def test_commands_as_text_and_slash_command(
    start_slack: Starter, fake_slack: FakeSlack, fake_anthropic: FakeAnthropic, mode: str
) -> None:
    slack = await start_slack(mode)
    await slack.send(fake_slack.im_message("U1", "/status", channel="D1"))
    (status,) = await slack.replies(1, "D1")
    assert "Session: agent:main:slack:direct:u1" in status["markdown_text"]

    await slack.command("status", user_id="U1", channel_id="D1")
    await until(lambda: fake_slack.response_url_posts)
    (_, body) = fake_slack.response_url_posts[0]
    assert body["response_type"] == "ephemeral"
    assert "Session: agent:main:slack:direct:u1" in body["text"]

    await slack.command("whoami", user_id="U5", channel_id="C1")
    await until(lambda: len(fake_slack.response_url_posts) > 1)
    assert "You are slack:U5" in fake_slack.response_url_posts[1][1]["text"]
    assert fake_anthropic.message_requests == []


async def test_bursts_and_streamed_edits_stay_under_the_channel_limit(
    start_slack: Starter, fake_slack: FakeSlack, fake_anthropic: FakeAnthropic
) -> None:
    # Slack's ~1 post a second per channel, enforced; replies in 2 messages of ~5,000 chars.
    flood = fake_slack.enforce_rate_limits()
    fake_anthropic.default_handler = long_replies(2, 5_000)
    fake_anthropic.chunk_delay = 0.01  # long enough for several preview edits
    slack = await start_slack("http", stream_interval=0.2)
    tags = [f"msg-{n}" for n in range(4)]
    for tag in tags:
        assert await slack.send(fake_slack.im_message("U1", f"{tag} go on", channel="D5")) == 200
    await until(
        lambda: all(
            any(is_last_part(t, tag, 2) for t in fake_slack.message_texts("D5")) for tag in tags
        ),
        within=60,
    )
    assert_complete_and_in_order(fake_slack.message_texts("D5"), tags, 2)
    assert fake_slack.calls_to("chat.update")  # the replies streamed as edits
    assert flood.refused == 0


def tiny_png() -> bytes:
    import io

    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (64, 48), (0, 120, 0)).save(out, "PNG")
    return out.getvalue()


async def test_files_of_one_post_reach_the_model_in_one_turn(
    start_slack: Starter, fake_slack: FakeSlack, fake_anthropic: FakeAnthropic
) -> None:
    slack = await start_slack("http")
    photo = fake_slack.add_file(tiny_png(), "plant.png", "image/png")
    notes = fake_slack.add_file(b"water on mondays\n", "care.txt", "text/plain")
    event = fake_slack.im_message(
        "U1", "is this plant ok?", channel="D7", subtype="file_share", files=[photo, notes]
    )
    assert await slack.send(event) == 200
    await slack.replies(1, "D7")
    (request,) = [r for r in fake_anthropic.message_requests if "plant ok" in words(r.body)]
    blocks = request.body["messages"][-1]["content"]
    assert [b["type"] for b in blocks].count("image") == 1
    assert "water on mondays" in words(request.body) and "care.txt" in words(request.body)


async def test_a_file_the_bot_token_cannot_read_is_reported_not_sent_empty(
    start_slack: Starter, fake_slack: FakeSlack, fake_anthropic: FakeAnthropic
) -> None:
    slack = await start_slack("http")
    hidden = fake_slack.add_file(tiny_png(), "secret.png", "image/png", readable_with="xoxb-x")
    event = fake_slack.im_message(
        "U1", "look at this", channel="D8", subtype="file_share", files=[hidden]
    )
    assert await slack.send(event) == 200
    replies = await slack.replies(2, "D8")
    notice = next(r for r in replies if "secret.png" in r.get("text", "") + str(r))
    assert "couldn't get secret.png" in str(notice) and "refused" in str(notice)
    request = next(r for r in fake_anthropic.message_requests if "look at this" in words(r.body))
    assert all(b["type"] != "image" for b in request.body["messages"][-1]["content"])
    assert "could not be downloaded" in words(request.body)


async def test_send_file_uploads_into_the_thread_through_the_external_flow(
    start_slack: Starter, fake_slack: FakeSlack, fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    slack = await start_slack("http")
    (tmp_path / "workspace" / "report.csv").write_bytes(b"week,sales\n1,40\n")
    # The outbox waits out Slack's rate limit and uploads the file once, before the reply.
    fake_slack.fail_next("files.getUploadURLExternal", status=429, retry_after=1)
    fake_anthropic.queue_tool_use("send_file", {"path": "report.csv", "caption": "here it is"})
    fake_anthropic.queue_text("uploaded")
    event = fake_slack.im_message("U1", "send the report", channel="D9", thread_ts="1700.1")
    assert await slack.send(event) == 200
    await slack.fake.wait_for(
        "chat.postMessage", timeout=10, predicate=lambda p: "uploaded" in str(p)
    )
    (shared,) = [f for f in fake_slack.shared_files if f["channel"] == "D9"]
    assert shared["data"] == b"week,sales\n1,40\n" and shared["name"] == "report.csv"
    assert shared["initial_comment"] == "here it is" and shared["thread_ts"] == "1700.1"
    assert not fake_slack.uploads  # every upload was completed
    assert len(fake_slack.calls_to("files.getUploadURLExternal")) == 2  # refused, then accepted


async def test_rate_limited_replies_wait_for_retry_after(
    start_slack: Starter, fake_slack: FakeSlack
) -> None:
    slack = await start_slack("http")
    fake_slack.fail_next("chat.postMessage", "ratelimited", status=429, retry_after=1, times=2)
    assert await slack.send(fake_slack.im_message("U1", "slow down", channel="D7")) == 200
    await until(lambda: any("slow down" in t for t in fake_slack.posted_texts("D7")), 15)
    assert len(fake_slack.calls_to("chat.postMessage")) == 3  # two refused, one accepted
    assert len(fake_slack.posted_texts("D7")) == 1


async def test_a_post_in_flight_at_kill_9_is_not_posted_again(
    start_slack: Starter, fake_slack: FakeSlack
) -> None:
    slack = await start_slack("http")
    held = fake_slack.hold_next_answer("chat.postMessage")
    assert await slack.send(fake_slack.im_message("U1", "in flight", channel="D8")) == 200
    await fake_slack.wait_for("chat.postMessage", timeout=10)
    await slack.krill.kill()  # Slack has the post; Krill never heard back
    held.set()
    restarted = await start_slack("http")
    await restarted.settle(fake_slack.im_message("U1", "after the restart", channel="D8"))
    posted = fake_slack.posted_texts("D8")
    assert sum("in flight" in t for t in posted) == 1
    lookups = fake_slack.calls_to("conversations.history")
    assert any(str(p.get("include_all_metadata")) in ("1", "true") for p in lookups)
