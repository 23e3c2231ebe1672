"""The transcript the summarizer reads: labelled items, housekeeping left out."""

from __future__ import annotations

from bot.config import ContextConfig
from bot.context.compaction.carryover import tool_failures
from bot.context.compaction.guard import latest_ask
from bot.context.compaction.render import render_items
from bot.context.compaction.split import split_history
from tests import entries as build
from tests.compaction_entries import call, internal, reply, result, turns, user

CFG = ContextConfig()


def test_render_labels_messages_and_skips_housekeeping() -> None:
    previous = build.summary("## Decisions\n- tea")
    history = [
        previous,
        user("find the report"),
        call("c1", "search"),
        result("c1", "boom", error=True),
        internal("store memories", "f"),
        reply("NO_REPLY", "f"),
        reply("it failed"),
        *turns(3),
    ]
    items = render_items(split_history(history, 3), "UTC", CFG)
    assert [i.role for i in items] == ["summary", "user", "assistant", "tool", "assistant"]
    assert items[1].text.endswith("Al: find the report") and items[1].ask == "find the report"
    assert items[2].text == '[called search {"q": 1}]'
    assert items[3].is_error and items[3].tool == "search"
    assert latest_ask(items) == "find the report"
    assert tool_failures(items) == ["- search: boom"]


def test_long_tool_results_are_read_as_head_and_tail() -> None:
    log = "\n".join(f"line {i:05d}" for i in range(2_000))
    split = split_history([user("read"), call("c"), result("c", log), *turns(3)], 3)
    (tool_item,) = [i for i in render_items(split, "UTC", CFG) if i.role == "tool"]
    body = tool_item.text.partition("\n")[2]
    assert body.startswith(log[:1500]) and log[-1500:] in body and len(body) < 3_200
