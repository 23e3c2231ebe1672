"""Reply budgets for refused senders: a few answers per window, then silence."""

from __future__ import annotations

from bot.sessions.throttle import ReplyBudget


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_sender_gets_a_few_replies_per_window_then_silence() -> None:
    clock = Clock()
    budget = ReplyBudget(replies=3, window=600, clock=clock)
    assert [budget.take("telegram:1") for _ in range(5)] == [True, True, True, False, False]
    assert budget.take("telegram:2")  # others keep their own budget
    clock.now = 599
    assert not budget.take("telegram:1")
    clock.now = 600  # the first replies have left the window
    assert budget.take("telegram:1")


def test_only_the_most_recent_senders_are_remembered() -> None:
    budget = ReplyBudget(replies=1, window=600, max_senders=2, clock=Clock())
    assert budget.take("a") and budget.take("b") and budget.take("c")
    assert not budget.take("c") and not budget.take("b")
    assert budget.take("a")  # forgotten, so it starts afresh


def test_turn_budget_says_how_long_a_sender_waits_and_counts_merged_turns() -> None:
    clock = Clock()
    budget = ReplyBudget(replies=2, window=60, clock=clock)
    assert budget.left("a") == 2 and budget.wait(["a"]) == 0
    budget.record(["a"])
    clock.now = 10
    budget.record(["a", "b"])
    assert budget.left("a") == 0 and budget.left("b") == 1
    assert budget.wait(["b"]) == 0
    assert budget.wait(["a", "b"]) == 50  # until the first turn leaves the window
    budget.record(["a"])  # a merged turn that ran anyway still counts
    clock.now = 60
    assert budget.wait(["a"]) == 10
