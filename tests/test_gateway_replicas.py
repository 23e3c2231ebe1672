"""Two replicas (two `App`s, each with its own store connection and lease holder id) on one
store, as two `krill run` processes behind a load balancer: one chat's messages reach them
alternately, and every message is answered once, in the order it was sent."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from bot.transcript import PersonTurn
from tests.app_harness import Harness
from tests.fakes.anthropic import FakeAnthropic, Reply
from tests.replica_storage import STORES, storage_lines

DM_KEY = "agent:main:local:direct:alice"


@pytest.fixture(params=STORES)
def storage(request: pytest.FixtureRequest) -> str:
    return storage_lines(request)


async def test_one_chats_messages_spread_over_two_replicas_are_answered_once_in_order(
    tmp_path: Path, fake_anthropic: FakeAnthropic, storage: str
) -> None:
    asked: list[str] = []  # the newest person line of each model request, in arrival order

    def handler(body: dict[str, Any]) -> Reply:
        last = body["messages"][-1]["content"]
        asked.append(str(last))
        # Slow enough that later messages arrive at the other replica mid-turn.
        return Reply.text("noted", delay=0.3)

    fake_anthropic.default_handler = handler
    sent = [f"message {n}" for n in range(1, 9)]
    toml = f"[storage]\n{storage}"
    async with (
        Harness(tmp_path, fake_anthropic.url, toml) as a,
        Harness(tmp_path, fake_anthropic.url, toml) as b,
    ):
        assert a.app is not None and b.app is not None
        for n, text in enumerate(sent):
            replica = (a, b)[n % 2]
            await replica.send(text, wait=False)
            await asyncio.sleep(0.05)
        store = a.app.store
        deadline = time.time() + 30
        while await store.unfinished_inbound():
            assert time.time() < deadline, "messages left unanswered"
            await asyncio.sleep(0.05)
        await a.app.lanes.wait_idle()
        await b.app.lanes.wait_idle()
        session = await store.current_session(DM_KEY)
        assert session is not None
        turns = [
            e.payload
            for e in await store.transcript(session.session_id)
            if isinstance(e.payload, PersonTurn)
        ]
    answered = [line.text for turn in turns for line in turn.messages]
    assert answered == sent  # each once, in the order sent, whichever replica took it in
    assert len(turns) == len(asked)  # one model request per turn: none ran twice
    # The model saw them in order too: each request's newest lines come after the last's.
    seen = [text for prompt in asked for text in sent if text in prompt]
    assert seen == sent
