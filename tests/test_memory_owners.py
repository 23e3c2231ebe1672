"""End to end with the fake model: memory has owners (docs/contracts.md section 7). Facts planted in
one person's DM, by memory_append in a turn and by the flush before /reset, never reach a
group's or another person's model requests, through recall, memory_search or memory_get,
whatever words they use; that person's DM and an admin's DM still find them."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from bot.context.messages import RECALL_HEADER
from bot.types import ChatType
from tests.app_harness import Harness, message
from tests.fakes.anthropic import FakeAnthropic

# Local users are admins by default (admin.local_is_admin); here only carol is.
ADMIN = """
[admin]
users = ["local:carol"]
local_is_admin = false
"""
LOCKER = "locker code is 7319"
PASSPORT = "passport ends in 5521"
SECRETS = ("7319", "5521")
QUESTION = "what is alice's locker code and passport number?"


def alice_note() -> str:
    return f"memory/people/local-alice/{dt.datetime.now(dt.UTC):%Y-%m-%d}.md"


def request_text(request: Any) -> str:
    return request.system_text + str(request.messages)


async def ask(h: Harness, fake: FakeAnthropic, msg: Any) -> list[Any]:
    """Send one message and return the model requests its turn made."""
    before = len(fake.message_requests)
    await h.send(msg)
    return fake.message_requests[before:]


def probing(fake: FakeAnthropic) -> None:
    """Queue a turn that tries every way in: recall (automatic), search, then get."""
    fake.queue_tool_use("memory_search", {"query": "alice locker code passport"})
    fake.queue_tool_use("memory_get", {"path": alice_note()})
    fake.queue_text("I don't know.")


async def test_a_dm_fact_reaches_only_that_dm_and_admins(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    fake = fake_anthropic
    fake.queue_tool_use("memory_append", {"text": f"Alice's {LOCKER}"})
    fake.queue_text("Noted.")
    fake.queue_text("OK.")
    fake.queue_tool_use("memory_append", {"text": f"Alice's {PASSPORT}"})  # the reset flush
    fake.queue_text("NO_REPLY")
    for _ in range(2):  # a group and Bob's DM
        probing(fake)
    fake.queue_text("7319, and it ends in 5521.")  # Alice asks again
    fake.queue_text("7319.")  # the admin asks
    async with Harness(tmp_path, fake.url, ADMIN) as h:
        await h.send(f"remember: my {LOCKER}")
        await h.send(f"and my {PASSPORT}")
        await h.send("/reset")
        workspace = h.workspace
        group = await ask(
            h,
            fake,
            message(QUESTION, user="bob", chat_type=ChatType.GROUP, chat_id="team", mentioned=True),
        )
        bob = await ask(h, fake, message(QUESTION, user="bob"))
        alice = await ask(h, fake, message(QUESTION))
        carol = await ask(h, fake, message(QUESTION, user="carol"))
    for requests in (group, bob):
        assert len(requests) == 3  # recall, then the search result, then the get result
        for request in requests:
            assert not any(secret in request_text(request) for secret in SECRETS)
        search, get = (r.messages[-1]["content"][0] for r in requests[1:])
        assert "No memory matches" in str(search["content"])
        assert get["is_error"] is True and "not part of this conversation" in str(get["content"])
    for requests in (alice, carol):
        recalled = requests[0].last_user_text
        assert RECALL_HEADER in recalled and "7319" in recalled and "5521" in recalled
    note = (workspace / alice_note()).read_text()
    assert LOCKER in note and PASSPORT in note
    assert not list((workspace / "memory").glob("*.md"))  # nothing in the operator's notes
