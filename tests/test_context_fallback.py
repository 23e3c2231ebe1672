"""The fallback when compaction cannot run: leave the oldest turns out of the request, on a
person's turn, saying so."""

from __future__ import annotations

from bot.context.fallback import CUT_NOTE, cut_messages, cut_point
from bot.transcript import Entry
from tests.compaction_entries import call, reply, result, turns, user
from tests.entries import summary

TZ = "UTC"


def big_turns(n: int, size: int) -> list[Entry]:
    history: list[Entry] = []
    for i in range(n):
        history += [user(f"question {i}"), call(f"c{i}"), result(f"c{i}", "x" * size)]
        history.append(reply(f"answer {i}"))
    return history


def text_of(message: dict) -> str:
    return "\n".join(b.get("text", "") for b in message["content"] if b["type"] == "text")


def cut(history: list[Entry], budget: int, current: str | None = None) -> str | None:
    return cut_point(
        history, current=current, keep_turns=3, budget_tokens=budget, tz=TZ, result_limit=10**6
    )


def test_the_cut_keeps_the_latest_turns_that_fit_on_a_person_turn() -> None:
    history = big_turns(6, 4_000)  # ~1,260 tokens a turn
    starts = [e.id for e in history if e.kind == "person_turn"]
    assert cut(history, 10_000) == starts[3]
    # Only two of the three kept turns fit: the third is left out too.
    assert cut(history, 3_000) == starts[4]
    # A cut that no longer makes enough room moves on, never back.
    assert cut(history, 10_000, current=starts[4]) == starts[5]
    # Even the kept turns give way, down to the latest one; that one always stays.
    two = turns(2)
    assert cut(two, 10) == two[4].id
    assert cut(turns(1), 10) is None


def test_the_request_says_how_much_is_left_out_and_keeps_the_summary() -> None:
    body = turns(4)
    history = [summary("## Decisions\n- ship it"), *body]
    cut = body[8].id  # the third turn's person entry
    messages = cut_messages(history, cut, TZ)
    assert messages is not None
    opening = text_of(messages[0])
    assert opening.startswith(CUT_NOTE.format(count=8).split(":")[0])
    assert "8 earlier message(s)" in opening and "ship it" in opening
    assert "question 2" in opening and "question 1" not in str(messages)
    assert cut_messages(history, "gone", TZ) is None
