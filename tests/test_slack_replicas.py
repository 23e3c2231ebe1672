"""Two replicas of Krill on one store, each with its own Slack Socket Mode connection (Slack
spreads an app's events across its connections): the real `App`s, the real slack-bolt
adapter and the fake Slack and model. What one replica learned, the other knows; an event
Slack delivers to both counts once; a sender's budget is one budget across replicas."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from bot.app import App
from bot.config import load_config
from bot.gateway.budgets import COMMAND_REPLIES
from bot.types import Address, OutboundMessage
from channels.registry import CHANNELS
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.slack import FakeSlack
from tests.log_sentinel import log_sentinel
from tests.replica_storage import STORES, storage_url

Start = Callable[..., Any]


async def until(check: Callable[[], Any], within: float = 15.0) -> None:
    """Wait until `check()` (a plain or an async function) holds."""
    deadline = asyncio.get_running_loop().time() + within
    while not (await check() if asyncio.iscoroutinefunction(check) else check()):
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


def inbound(apps: list[App], result: str) -> float:
    """How many Slack messages the replicas together decided `result` for."""
    labels = {"channel": "slack", "result": result}
    return sum(
        app.metrics.registry.get_sample_value("krill_inbound_total", labels) or 0.0 for app in apps
    )


@pytest.fixture(params=STORES)
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The replicas' `storage.url`: one SQLite file, or one PostgreSQL database."""
    return storage_url(request, tmp_path)


async def count_outbox_rows(url: str) -> int:
    """How many reply chunks the replicas together queued on Slack (each is one answer,
    whichever replica then delivers it)."""
    sql = "SELECT COUNT(*) FROM outbox WHERE channel = 'slack'"
    if url.startswith("sqlite:///"):
        with sqlite3.connect(url.removeprefix("sqlite://")) as db:
            return int(db.execute(sql).fetchone()[0])
    db = await asyncpg.connect(url)
    try:
        return int(await db.fetchval(sql))
    finally:
        await db.close()


@pytest.fixture
async def replicas(
    tmp_path: Path, fake_slack: FakeSlack, fake_anthropic: FakeAnthropic, storage: str
) -> AsyncIterator[Start]:
    started: list[App] = []
    running = contextlib.AsyncExitStack()
    (tmp_path / "workspace").mkdir()

    async def start(
        count: int = 2, lease_seconds: float = 15.0, admins: tuple[str, ...] = ()
    ) -> list[App]:
        for i in range(count):
            folder = tmp_path / f"replica-{i}"
            folder.mkdir()
            (folder / "krill.toml").write_text(
                "[anthropic]\nmax_retries = 0\n"
                f'[storage]\nurl = "{storage}"\n'
                f"lease_seconds = {lease_seconds}\n"
                f'[workspace]\npath = "{tmp_path}/workspace"\n'
                "[slack]\nenabled = true\n"
                f'bot_token = "{fake_slack.bot_token}"\napp_token = "{fake_slack.app_token}"\n'
                f'mode = "socket"\napi_base_url = "{fake_slack.api_url}"\n'
                'dm_policy = "open"\nstream_interval = 0\n'
                "[slack.pacing]\nchannel_interval = 0\n"
                f"[admin]\nusers = {list(admins)!r}\n".replace("'", '"'),
                encoding="utf-8",
            )
            env = {"ANTHROPIC_API_KEY": "test", "ANTHROPIC_BASE_URL": fake_anthropic.url}
            config = load_config(str(folder / "krill.toml"), env=env, channels=CHANNELS)
            app = App(config, with_server=False, background=True)
            started.append(await running.enter_async_context(app))
            await fake_slack.wait_for_socket(i + 1)
        return started

    async with running:
        yield start


async def test_a_thread_joined_through_one_replica_needs_no_mention_on_another(
    replicas: Start, fake_slack: FakeSlack, fake_anthropic: FakeAnthropic
) -> None:
    await replicas(2)
    fake_anthropic.hold()  # replica 0's turn is still running when the reply arrives
    mention = fake_slack.app_mention("C1", "U1", "open a thread please")
    await fake_slack.wait_for_ack(await fake_slack.push_socket_event(mention, to=0))
    await fake_anthropic.wait_for_requests(1, within=10)
    thread = mention["event"]["ts"]
    reply = fake_slack.channel_message("C1", "U2", "and a reply without mention", thread_ts=thread)
    # Before the first turn ended, the thread's session has no turn yet: only the shared
    # record of the thread tells replica 1 that Krill takes part in it.
    await fake_slack.wait_for_ack(await fake_slack.push_socket_event(reply, to=1))
    fake_anthropic.release()
    requests = await fake_anthropic.wait_for_requests(2, within=15)
    assert "and a reply without mention" in requests[1].last_user_text
    answers = await fake_slack.wait_for(
        "chat.postMessage", 2, timeout=15, predicate=lambda p: p.get("thread_ts") == thread
    )
    assert len(answers) == 2


async def test_an_event_delivered_to_both_replicas_counts_once(
    replicas: Start, fake_slack: FakeSlack, fake_anthropic: FakeAnthropic, storage: str
) -> None:
    apps = await replicas(2)
    event = fake_slack.im_message("U1", "hello just once", channel="D1")
    for to in (0, 1):
        await fake_slack.wait_for_ack(await fake_slack.push_socket_event(event, to=to))
    command = fake_slack.slash_command(text="status", channel_id="C1")
    for to in (1, 0):
        envelope = await fake_slack.push_socket_slash_command(command, to=to)
        await fake_slack.wait_for_ack(envelope)
    await until(lambda: inbound(apps, "duplicate") == 2)
    await until(lambda: inbound(apps, "accepted") == 1 and inbound(apps, "command") == 1)
    await fake_slack.wait_for("chat.postMessage", 1, timeout=15)
    trigger = command["response_url"].rsplit("/", 1)[1]
    await until(lambda: any(rid == trigger for rid, _ in fake_slack.response_url_posts))
    await until(lambda: fake_anthropic.message_requests)
    assert [r.last_user_text.count("hello just once") for r in fake_anthropic.message_requests] == [
        1
    ]
    # The DM's reply and the command's answer, each queued once.
    assert await count_outbox_rows(storage) == 2


async def test_a_response_url_learned_by_one_replica_serves_a_private_answer_from_another(
    replicas: Start, fake_slack: FakeSlack
) -> None:
    apps = await replicas(2)
    command = fake_slack.slash_command(text="status", channel_id="C1", user_id="U7")
    await fake_slack.wait_for_ack(await fake_slack.push_socket_slash_command(command, to=0))
    private = Address("slack", "C1", private_to="U7")
    await apps[1].channels["slack"].deliver(OutboundMessage(private, "only for you", "t1", 0))
    trigger = command["response_url"].rsplit("/", 1)[1]
    await until(
        lambda: any("only for you" in str(body) for _, body in fake_slack.response_url_posts)
    )
    assert [rid for rid, body in fake_slack.response_url_posts if "only for you" in str(body)] == [
        trigger
    ]
    assert not fake_slack.calls_to("chat.postEphemeral")


async def test_a_senders_command_budget_is_one_budget_across_replicas(
    replicas: Start, fake_slack: FakeSlack, storage: str
) -> None:
    apps = await replicas(2)
    sent = COMMAND_REPLIES + 4
    triggers = []
    for i in range(sent):
        command = fake_slack.slash_command(text="status", channel_id="C1", user_id="U3")
        triggers.append(command["response_url"].rsplit("/", 1)[1])
        await fake_slack.wait_for_ack(await fake_slack.push_socket_slash_command(command, to=i % 2))
    await until(lambda: inbound(apps, "command") == sent)

    async def delivered() -> bool:
        return (await apps[0].store.outbox_summary()).pending == 0

    await until(delivered)
    assert await count_outbox_rows(storage) == COMMAND_REPLIES
    use = await apps[1].store.budget_use("commands", "slack:U3", now=time.time())
    assert use is not None and use.used == COMMAND_REPLIES


async def test_a_stream_opened_by_one_replica_is_continued_and_closed_by_another(
    replicas: Start, fake_slack: FakeSlack
) -> None:
    apps = await replicas(2)
    first, second = (app.channels["slack"] for app in apps)
    address = Address("slack", "D1", thread_id="9.000100")
    ts = await first.deliver(OutboundMessage(address, "Draft", "t1", 0, final=False))
    # The outbox may hand the next chunks of the reply to any replica's sender.
    await second.deliver(OutboundMessage(address, "Draft two", "t1", 0, edit_of=ts, final=False))
    await first.deliver(OutboundMessage(address, "Draft two three", "t1", 0, edit_of=ts))
    assert [p["markdown_text"] for p in fake_slack.calls_to("chat.appendStream")] == [" two"]
    assert fake_slack.calls_to("chat.stopStream")[0].get("markdown_text") == " three"
    assert fake_slack.stream_text(ts) == "Draft two three"
    assert fake_slack.calls_to("chat.update") == []


async def test_a_stop_sent_to_one_replica_stops_the_turn_running_on_another(
    replicas: Start, fake_slack: FakeSlack, fake_anthropic: FakeAnthropic
) -> None:
    await replicas(2, lease_seconds=1.5, admins=("slack:U1",))
    fake_anthropic.hold()
    story = fake_slack.im_message("U1", "tell me a very long story", channel="D1")
    await fake_slack.wait_for_ack(await fake_slack.push_socket_event(story, to=0))
    await fake_anthropic.wait_for_requests(1, within=10)
    with log_sentinel("bot.gateway.leases", "/stop from elsewhere") as stopped:
        stop = fake_slack.im_message("U1", "/stop", channel="D1")
        await fake_slack.wait_for_ack(await fake_slack.push_socket_event(stop, to=1))
        await asyncio.wait_for(stopped.wait(), 15)
    fake_anthropic.release()
    after = fake_slack.im_message("U1", "a question after the stop", channel="D1")
    await fake_slack.wait_for_ack(await fake_slack.push_socket_event(after, to=0))
    await fake_slack.wait_for(
        "chat.postMessage",
        timeout=15,
        predicate=lambda p: "a question after the stop" in p.get("markdown_text", ""),
    )
    texts = [p.get("markdown_text", "") for p in fake_slack.calls_to("chat.postMessage")]
    assert any("Stopped" in t for t in texts)
    assert not any("echo: tell me a very long story" in t for t in texts)
