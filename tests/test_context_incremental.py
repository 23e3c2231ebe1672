"""A session's history is kept decoded and rendered between turns and only extended; what
it sends must stay byte-identical to a process that kept nothing, after every kind of
change a conversation goes through."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from anthropic._utils._prepare import serialize_data

from bot.app import App
from bot.context import messages as rendering
from bot.context.messages import build_messages
from bot.providers.anthropic import request_body
from bot.providers.base import ModelRequest
from bot.store.factory import store_for
from bot.store.transcript import HistoryCache
from bot.transcript import AssistantReply, ChatLine, Entry, PersonTurn, ToolResults
from bot.types import Attachment, MediaKind
from tests.app_harness import Harness, message
from tests.fakes.anthropic import FakeAnthropic, Reply
from tests.test_context_e2e import TOML as E2E_TOML
from tests.test_context_e2e import dump_tool, router
from tests.test_media import png

KEY = "agent:main:local:direct:alice"
HAIKU = "claude-haiku-4-5"
# The context tests' small window, a second model with a smaller one, old images as
# placeholders after one turn, and tool results over 4,000 bytes kept on disk.
TOML = (
    E2E_TOML.replace("[agent]\n", f'[agent]\nmodels = ["claude-sonnet-4-6", "{HAIKU}"]\n')
    + "[media]\nimage_max_edge = 256\nkeep_images_turns = 1\n"
    + "[tools.results]\nthreshold_bytes = 4000\n"
    + f'[models."{HAIKU}"]\ncontext_window = 12000\n'
)


def chat(body: dict[str, Any]) -> Any:
    """Reads three files when asked to, answers plainly otherwise."""
    last = body["messages"][-1]["content"]
    asked = any("read" in str(b.get("text", "")) for b in last)
    if not asked or any(b.get("type") == "tool_result" for b in last):
        return "Noted."
    calls = [
        {"type": "tool_use", "id": f"toolu_{len(body['messages'])}{n}", "name": "dump"}
        for n in ("a", "b", "c")
    ]
    return Reply([{**c, "input": {"name": c["id"]}} for c in calls], stop_reason="tool_use")


@contextmanager
def kept_nothing(app: App) -> Iterator[None]:
    """As a process that has just started: no decoded, rendered or built history."""
    saved = rendering._rendered, rendering._built, app.store.histories
    rendering._rendered, rendering._built = {}, {}
    app.store.histories = HistoryCache()
    try:
        yield
    finally:
        rendering._rendered, rendering._built = saved[0], saved[1]
        app.store.histories = saved[2]


async def request_text(app: App) -> str:
    session = await app.store.current_session(KEY)
    assert session is not None
    history = await app.store.load_history(session.session_id)
    sent = await app.context.requests.request_messages(session, history)
    return json.dumps(sent, ensure_ascii=False)


async def assert_same_as_rebuilt(app: App) -> str:
    kept = await request_text(app)
    with kept_nothing(app):
        rebuilt = await request_text(app)
    assert kept == rebuilt
    return kept


async def test_kept_history_sends_what_a_full_rebuild_sends_after_every_kind_of_change(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    now = [1_000_000.0]
    fake_anthropic.cache.clock = lambda: now[0]
    fake_anthropic.default_handler = router(chat)
    async with Harness(tmp_path, fake_anthropic.url, TOML, clock=lambda: now[0]) as h:
        h.app.tools.register(dump_tool(10_000))  # over threshold_bytes: kept on disk
        for i in range(3):  # person turns and replies
            await h.send(f"Hello {i}.")
            await assert_same_as_rebuilt(h.app)
        await h.send("Please read the three files.")  # tool calls and their results
        assert h.channel.finals[-1] == "Noted."
        text = await assert_same_as_rebuilt(h.app)
        assert "tool_result" in text
        photo = dataclasses.replace(
            message("what colour is this?"),
            attachments=[Attachment(MediaKind.IMAGE, "blue.png", "image/png", data=png(800, 400))],
        )
        await h.send(photo)
        assert '"type": "image"' in await assert_same_as_rebuilt(h.app)
        now[0] += 10
        await h.send("and now?")  # warm: nothing about the past changes
        await assert_same_as_rebuilt(h.app)
        now[0] += 400
        await h.send("Please read the three files again.")  # cold: pruning, image placeholder
        text = await assert_same_as_rebuilt(h.app)
        assert "[image: blue.png, 256x128]" in text

        # Rows the process already read go away (the first exchange), and another process
        # appends to the same session (its rows arrive unannounced): the history is as long
        # as before, and must still be read again.
        session = await h.app.store.current_session(KEY)
        assert session is not None
        first, answer = (await h.app.store.load_history(session.session_id))[:2]
        for gone in (first, answer):
            await h.app.store.db.execute("DELETE FROM entries WHERE id = ?", gone.id)
        other = store_for(h.app.config)
        await other.open()
        try:
            line = ChatLine("m-other", "local", "alice", "from the other replica", timestamp=now[0])
            reply = AssistantReply([{"type": "text", "text": "answered elsewhere"}])
            await other.append_entries([Entry(session.session_id, PersonTurn([line]))])
            await other.append_entries([Entry(session.session_id, reply)])
        finally:
            await other.close()
        text = await assert_same_as_rebuilt(h.app)
        assert "answered elsewhere" in text and "Hello 0" not in text
        await h.send("after the deletion")
        await assert_same_as_rebuilt(h.app)

        await h.send(f"/model {HAIKU}")  # a smaller window: results capped harder
        await h.send("Please read the three files once more.")
        await assert_same_as_rebuilt(h.app)

        await h.send("/compact")
        assert "ompact" in h.channel.finals[-1]
        await assert_same_as_rebuilt(h.app)
        await h.send("after compaction")
        await assert_same_as_rebuilt(h.app)

        await h.send("/reset")
        await assert_same_as_rebuilt(h.app)
        await h.send("a fresh start")
        assert "Hello 0" not in await assert_same_as_rebuilt(h.app)


def turn(text: str) -> Entry:
    return Entry("s1", PersonTurn([ChatLine(text, "local", "alice", text, timestamp=0)]))


def test_a_history_that_needs_repair_is_built_as_a_full_rebuild_would_at_every_length() -> None:
    call = {"type": "tool_use", "id": "toolu_1", "name": "dump", "input": {}}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "done"}
    stray = {"type": "tool_result", "tool_use_id": "toolu_gone", "content": "orphan"}
    history = [
        turn("one"),
        Entry("s1", AssistantReply([{"type": "text", "text": "ok"}])),
        turn("two"),
        Entry("s1", AssistantReply([call])),  # interrupted: its result comes late
        turn("three"),
        Entry("s1", ToolResults([result])),
        Entry("s1", ToolResults([stray])),
        Entry("s1", AssistantReply([{"type": "text", "text": "fine"}])),
        turn("four"),
    ]
    for end in range(1, len(history) + 1):
        kept = build_messages(history[:end], "UTC")
        rendering._built.clear()
        assert kept == build_messages(history[:end], "UTC"), end


def test_the_request_body_is_what_the_sdk_would_send() -> None:
    request = ModelRequest(
        model="claude-sonnet-4-6",
        max_tokens=1000,
        system=[{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        messages=[{"role": "user", "content": [{"type": "text", "text": "Grüße, 你好 \u2028"}]}],
        tools=[{"name": "dump", "description": "d", "input_schema": {"type": "object"}}],
    )
    body = {
        "max_tokens": 1000,
        "messages": request.messages,
        "model": request.model,
        "system": request.system,
        "tools": request.tools,
        "stream": True,
    }
    assert request_body(request) == serialize_data(body, location="body").encode()
    # Encoded once, each message object: a new one is encoded anew.
    assert request_body(request) == serialize_data(body, location="body").encode()
    changed = {"role": "user", "content": [{"type": "text", "text": "another"}]}
    request.messages = [*request.messages, {"role": "assistant", "content": "ok"}, changed]
    body["messages"] = request.messages
    assert request_body(request) == serialize_data(body, location="body").encode()
