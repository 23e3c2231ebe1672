"""A model stream that ends cleanly but without `message_stop` (a proxy closing it, say) is
an interrupted reply, never a complete one: asked again while nothing was shown, otherwise
the shown part is finished with a note telling the person it was cut off."""

from __future__ import annotations

from pathlib import Path

from bot.errors import ModelStreamInterrupted
from bot.transcript import EntryKind
from tests.app_harness import Harness
from tests.fakes.anthropic import FakeAnthropic
from tests.krill_process import KrillProcess

KEY = "agent:main:local:direct:alice"
CUT_OFF_NOTE = f"⚠️ {ModelStreamInterrupted.user_message}"


async def test_a_stream_closed_before_anything_was_shown_is_asked_again(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.queue_clean_close(20, text="an answer that stops half way")
    fake_anthropic.queue_text("the whole answer")
    async with Harness(tmp_path, fake_anthropic.url) as h:
        await h.send("what is the answer?")
        assert h.app is not None
        session = await h.app.store.current_session(KEY)
        assert session is not None
        kinds = [e.kind for e in await h.app.store.transcript(session.session_id)]
    assert h.channel.finals == ["the whole answer"]
    assert kinds == [EntryKind.PERSON_TURN, EntryKind.ASSISTANT_REPLY]  # no half reply kept
    assert len(fake_anthropic.message_requests) == 2


async def test_a_stream_closed_twice_ends_in_a_clear_message(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.queue_clean_close(0)
    fake_anthropic.queue_clean_close(10)
    async with Harness(tmp_path, fake_anthropic.url) as h:
        await h.send("hello")
    assert h.channel.finals == [ModelStreamInterrupted.user_message]


async def test_krill_run_tells_the_person_when_a_shown_reply_was_cut_off(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    """With the real `krill run` and its web chat: the preview streamed part of the reply,
    then the stream closed without `message_stop`; the final message is that part plus the
    note, and the model is not asked again (it could show a different answer)."""
    story = "Once upon a time there was a lighthouse keeper who kept a very long log. " * 8
    fake_anthropic.chunk_delay = 0.1
    fake_anthropic.queue_clean_close(400, text=story)
    async with KrillProcess(tmp_path, {}, fake_anthropic.env()) as krill:
        result = await krill.chat("tell me a story")
    (final,) = result["replies"]
    assert final.startswith("Once upon a time there was a lighthouse keeper")
    assert final.endswith(CUT_OFF_NOTE)
    assert len(final) < len(story)
    assert len(fake_anthropic.message_requests) == 1
