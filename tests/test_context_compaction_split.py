"""Where compaction cuts the history: summarized vs kept turns."""

from __future__ import annotations

from bot.context.compaction.split import choose_split, split_history
from bot.transcript import EntryKind, is_person_turn
from tests import entries as build
from tests.compaction_entries import call, first_text, internal, reply, result, turns, user


def test_split_keeps_the_last_turns_with_their_tool_results() -> None:
    history = turns(5)
    split = split_history(history, 3)
    assert split.summarize == history[:8] and split.kept == history[8:]
    assert first_text(split.kept[0]) == "question 2"
    previous = build.summary("old")
    assert split_history([previous, *history], 3).previous is previous.payload


def test_nothing_to_summarize_without_enough_user_turns() -> None:
    assert split_history(turns(3), 3).summarize == []
    no_user = [reply("hello"), call("c"), result("c", "x")]
    assert split_history(no_user, 3).summarize == []
    # Internal prompts (memory flush) are not turns a person started.
    flush = [internal("flush now", "f1"), reply("NO_REPLY", "f1")]
    assert split_history([*turns(2), *flush, *turns(1)], 3).summarize == []


def test_fewer_turns_are_kept_when_they_would_not_fit() -> None:
    history = [*turns(3), user("big"), call("b"), result("b", "x" * 40_000), reply("ok")]
    split = choose_split(history, keep_turns=3, budget_tokens=5_000, tz="UTC", result_limit=10**6)
    # Not even the last turn fits: it is cut inside, after its big tool round.
    assert split.kept == history[-1:] and split.summarize == history[:-1]
    roomy = choose_split(history, keep_turns=3, budget_tokens=10**6, tz="UTC", result_limit=10**6)
    assert len([e for e in roomy.kept if is_person_turn(e)]) == 3


def test_one_long_tool_loop_is_cut_between_rounds_keeping_calls_with_results() -> None:
    loop = [user("migrate the database")]
    for i in range(12):
        loop += [call(f"c{i}"), result(f"c{i}", f"step {i} " + "x" * 4_000)]
    loop.append(reply("done"))
    history = [*turns(1), *loop]
    split = choose_split(history, keep_turns=3, budget_tokens=5_000, tz="UTC", result_limit=10**6)
    assert split.summarize and split.kept
    assert split.summarize[-1].kind == EntryKind.TOOL_RESULTS  # a round ends the summarized part
    assert split.kept[0].kind == EntryKind.ASSISTANT_REPLY  # the next round's call starts the rest
    assert 2 <= len(split.kept) < len(loop)
    assert split.summarize + split.kept == history
    # A turn without tool rounds cannot be cut inside.
    plain = [user("x" * 40_000), reply("y")]
    assert (
        choose_split(plain, keep_turns=3, budget_tokens=10, tz="UTC", result_limit=10**6).summarize
        == []
    )
