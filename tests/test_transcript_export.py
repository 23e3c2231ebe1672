"""How `krill sessions export/show` present entries: JSON records carry the kind and the
stored payload; lines read like a chat log."""

from __future__ import annotations

import json

from bot.transcript import Entry, EntryKind, Reset, payload_from
from bot.transcript_export import entry_line, entry_record
from bot.types import Usage
from tests import entries


def test_export_records_carry_the_kind_and_round_trip_the_payload() -> None:
    reply = entries.reply(entries.text("hello"), usage=Usage(input_tokens=3), turn_id="t")
    record = json.loads(json.dumps(entry_record(reply)))
    assert record["kind"] == "assistant_reply" and record["turn_id"] == "t"
    assert record["usage"]["input_tokens"] == 3
    assert payload_from(EntryKind(record["kind"]), record["payload"]) == reply.payload
    assert "type" not in record and "role" not in record


def test_lines_name_who_spoke_and_what_tools_did() -> None:
    call = {"type": "tool_use", "id": "t1", "name": "search", "input": {"q": "tea"}}
    result = {"type": "tool_result", "tool_use_id": "t1", "content": "x" * 12, "is_error": True}
    lines = [
        entry_line(e)
        for e in (
            entries.person("hi there"),
            entries.prompt("check the list"),
            entries.reply(entries.text("let me look"), call),
            entries.results(result),
            entries.summary("## Decisions", "e1"),
            Entry("s", Reset("/reset", "s2")),
        )
    ]
    assert lines[0].endswith("user: Al: hi there")
    assert lines[1].endswith("user: check the list")
    assert lines[2].endswith('assistant: let me look [tool search {"q": "tea"}]')
    assert lines[3].endswith("tool: [result 12 chars error]")
    assert lines[4].endswith("[compaction] kept from e1: ## Decisions")
    assert "[reset]" in lines[5] and "s2" in lines[5]
