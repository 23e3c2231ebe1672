"""The context plan as the store keeps it: every decision survives the trip, in one stable
text (replicas compare nothing else), and text it cannot read starts a new plan."""

from __future__ import annotations

from bot.context.plan import ContextPlan


def test_every_decision_survives_the_store_in_one_stable_text() -> None:
    plan = ContextPlan(
        compaction_id="c1",
        actions={"toolu_2": "clear", "toolu_1": "trim"},
        superseded={"toolu_3": "toolu_9"},
        placeholders={"krill-media:b?name=b.png", "krill-media:a?name=a.png"},
        cut_entry_id="e42",
    )
    text = plan.to_json()
    again = ContextPlan.from_json(text)
    assert again == plan
    # The same decisions in another order are the same text: a replica writes only changes.
    shuffled = ContextPlan(
        compaction_id="c1",
        actions={"toolu_1": "trim", "toolu_2": "clear"},
        superseded={"toolu_3": "toolu_9"},
        placeholders={"krill-media:a?name=a.png", "krill-media:b?name=b.png"},
        cut_entry_id="e42",
    )
    assert shuffled.to_json() == text
    plan.start_over("c2")
    assert plan == ContextPlan("c2")


def test_text_it_cannot_read_starts_a_new_plan() -> None:
    for text in (None, "", "not json", "[]", '{"version": 99, "actions": {"a": "trim"}}'):
        assert ContextPlan.from_json(text) == ContextPlan()
    odd = ContextPlan.from_json('{"version": 1, "actions": {"a": "explode", "b": "trim"}}')
    assert odd.actions == {"b": "trim"}
