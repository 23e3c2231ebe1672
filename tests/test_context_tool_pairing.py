"""tool_use / tool_result pairing repair, one test per kind of damage."""

from __future__ import annotations

from bot.context.messages import build_messages
from bot.context.tool_pairing import MISSING_RESULT, repair_pairing
from tests import entries as build


def ask(text: str = "go") -> dict:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def calls(*call_ids: str) -> dict:
    return {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": c, "name": "x", "input": {}} for c in call_ids],
    }


def results(*call_ids: str, text: str = "ok") -> dict:
    return {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": c, "content": text} for c in call_ids],
    }


def said(text: str = "done") -> dict:
    return {"role": "assistant", "content": [{"type": "text", "text": text}]}


def result_ids(message: dict) -> list[str]:
    return [b["tool_use_id"] for b in message["content"] if b["type"] == "tool_result"]


def test_well_paired_messages_come_back_unchanged() -> None:
    messages = [ask(), calls("a", "b"), results("a", "b"), said()]
    repaired, report = repair_pairing(messages)
    assert repaired == messages and not report.changed


def test_a_result_is_moved_next_to_its_call() -> None:
    # The result of "a" landed after a later user message (e.g. a crash and a resume).
    messages = [ask(), calls("a"), ask("meanwhile"), said("hm"), results("a")]
    repaired, report = repair_pairing(messages)
    assert report.moved == 1
    assert result_ids(repaired[2]) == ["a"]
    assert repaired[2]["content"][1]["text"] == "meanwhile"  # results first, then the text
    assert [m["role"] for m in repaired] == ["user", "assistant", "user", "assistant"]


def test_orphan_results_are_dropped() -> None:
    messages = [ask(), said(), results("ghost"), ask("next")]
    repaired, report = repair_pairing(messages)
    assert report.orphans_dropped == 1
    assert repaired == [ask(), said(), ask("next")]


def test_missing_results_get_a_synthetic_error() -> None:
    messages = [ask(), calls("a", "b"), results("a"), said()]
    repaired, report = repair_pairing(messages)
    assert report.synthesized == 1
    assert result_ids(repaired[2]) == ["a", "b"]
    assert repaired[2]["content"][1] == {
        "type": "tool_result",
        "tool_use_id": "b",
        "content": MISSING_RESULT,
        "is_error": True,
    }
    # A call that is the very last message is answered too.
    tail, report = repair_pairing([ask(), calls("c")])
    assert report.synthesized == 1 and result_ids(tail[-1]) == ["c"]


def test_duplicate_results_and_calls_are_dropped() -> None:
    messages = [ask(), calls("a"), results("a", text="first"), said(), results("a", text="again")]
    repaired, report = repair_pairing(messages)
    assert report.duplicates_dropped == 1
    assert repaired[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "a", "content": "first"}
    ]
    assert len(repaired) == 4
    twice = [ask(), calls("a"), results("a"), calls("a"), results("a")]
    repaired, report = repair_pairing(twice)
    assert report.duplicates_dropped == 2  # the second call and its second result
    assert repaired == [ask(), calls("a"), results("a")]


def test_build_messages_never_starts_with_orphaned_results() -> None:
    call = {"type": "tool_use", "id": "t1", "name": "x", "input": {}}
    result = {"type": "tool_result", "tool_use_id": "t1", "content": "ok"}
    # A history cut between a call and its result: the call is gone, its result remains.
    history = [
        build.reply(call),
        build.results(result),
        build.reply(build.text("so")),
        build.person("hi"),
    ]
    messages = build_messages(history, "UTC")
    assert [m["role"] for m in messages] == ["user"]
    assert all(b["type"] == "text" for b in messages[0]["content"])
