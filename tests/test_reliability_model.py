"""Faults around a turn, in one process: a model reply that breaks off mid-stream, and a
workspace memory cannot be written to. Each ends in a retried success or a clear message,
with the transcript still consistent."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from bot.memory.tools import write_failure
from bot.transcript import EntryKind
from tests.app_harness import Harness
from tests.fakes.anthropic import FakeAnthropic
from tests.fs_faults import read_only

KEY = "agent:main:local:direct:alice"
BROKE_OFF = "connection to the model broke off"


PERSON, REPLY, RESULTS = EntryKind.PERSON_TURN, EntryKind.ASSISTANT_REPLY, EntryKind.TOOL_RESULTS


async def kinds(h: Harness) -> list[EntryKind]:
    assert h.app is not None
    session = await h.app.store.current_session(KEY)
    assert session is not None
    return [e.kind for e in await h.app.store.transcript(session.session_id)]


async def test_a_stream_dropped_before_anything_was_shown_is_asked_again(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.queue_drop(30)
    fake_anthropic.queue_text("the full answer")
    async with Harness(tmp_path, fake_anthropic.url) as h:
        await h.send("what is the answer?")
        assert await kinds(h) == [PERSON, REPLY]
        assert h.app is not None and await h.app.store.unfinished_inbound() == []
    assert h.channel.finals == ["the full answer"]
    assert len(fake_anthropic.message_requests) == 2


async def test_an_error_event_mid_stream_is_asked_again(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.queue_stream_error("overloaded_error", "Overloaded", after_chars=15)
    fake_anthropic.queue_text("answered on the second try")
    async with Harness(tmp_path, fake_anthropic.url) as h:
        await h.send("hello")
    assert h.channel.finals == ["answered on the second try"]


async def test_a_stream_that_keeps_dropping_ends_in_a_clear_message(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.queue_drop(10)
    fake_anthropic.queue_drop(10)
    async with Harness(tmp_path, fake_anthropic.url) as h:
        await h.send("first question")
        assert len(h.channel.finals) == 1 and BROKE_OFF in h.channel.finals[0]
        # Only the person's message is recorded; the next turn still sees it.
        assert await kinds(h) == [PERSON]
        fake_anthropic.queue_text("both answered")
        await h.send("second question")
        assert await kinds(h) == [PERSON, PERSON, REPLY]
    assert h.channel.finals[-1] == "both answered"
    assert len(fake_anthropic.message_requests) == 3  # one retry, never a second
    assert "first question" in str(fake_anthropic.message_requests[-1].messages)


async def test_a_drop_after_a_preview_finishes_that_message_with_a_note(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    """Text already on screen cannot be taken back, so it is not asked for again (which
    could show a different answer): the preview is finalised in place with a note."""
    fake_anthropic.chunk_delay = 0.03
    fake_anthropic.queue_drop(120)
    async with Harness(tmp_path, fake_anthropic.url, stream_interval=0.01) as h:
        await h.send("tell me a story")
    previews = h.channel.previews
    (final,) = [d for d in h.channel.deliveries if d.final]
    assert previews, "the reply was streamed before it broke off"
    assert final.edit_of == h.channel.deliveries[0].message_id  # the same message, finished
    assert final.text.startswith(previews[-1]) and final.text.endswith(
        "⚠️ The connection to the model broke off before the reply was complete. "
        "Please send your message again."
    )
    assert len(fake_anthropic.message_requests) == 1


async def test_read_only_workspace_gives_a_tool_error_and_the_turn_still_answers(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.queue_tool_use("memory_append", {"text": "Alice likes tea"})
    fake_anthropic.queue_text("Noted - though I could not save it.")
    async with Harness(tmp_path, fake_anthropic.url) as h:
        with read_only(h.workspace, h.workspace / "memory") as locked:
            if not locked:
                pytest.skip("this filesystem cannot make a folder read-only for this user")
            await h.send("remember that I like tea")
        assert not list((h.workspace / "memory").glob("*.md"))
    assert h.channel.finals == ["Noted - though I could not save it."]
    result = fake_anthropic.message_requests[1].messages[-1]["content"][0]
    assert result["is_error"] is True
    assert "nothing was written: the workspace is read-only" in str(result["content"])
    assert str(tmp_path) not in str(result["content"])  # no host paths for the model


async def test_a_tool_call_reply_that_drops_is_retried_without_running_the_tool_twice(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.queue_tool_use("memory_append", {"text": "one note"})
    fake_anthropic.queue_drop(5)  # the reply after the tool result breaks off
    fake_anthropic.queue_text("done")
    async with Harness(tmp_path, fake_anthropic.url) as h:
        await h.send("note this")
        notes = "".join(p.read_text() for p in (h.workspace / "memory").glob("*.md"))
        assert await kinds(h) == [PERSON, REPLY, RESULTS, REPLY]
    assert notes.count("one note") == 1
    assert h.channel.finals == ["done"]
    assert len(fake_anthropic.message_requests) == 3


@pytest.mark.parametrize(
    ("error", "cause"),
    [
        (errno.ENOSPC, "the disk is full"),
        (errno.EROFS, "the workspace is read-only"),
        (errno.EACCES, "the workspace is read-only"),
    ],
)
def test_a_failed_memory_write_names_its_cause_without_paths(error: int, cause: str) -> None:
    message = write_failure(OSError(error, os.strerror(error), "/srv/krill/workspace/MEMORY.md"))
    assert message.startswith(f"nothing was written: {cause}.")
    assert "/srv" not in message
