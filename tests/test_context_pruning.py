"""Cache-TTL pruning: when it runs, what it may touch, and that it is stable."""

from __future__ import annotations

import json

from bot.config import ContextConfig
from bot.context.plan import ContextPlan
from bot.context.pruning import (
    CLEARED_TEXT,
    apply_pruning,
    cache_is_cold,
    plan_pruning,
    prunable_results,
    trim_text,
)

CFG = ContextConfig()
WINDOW = 100_000


def ask(text: str = "question") -> dict:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def call(call_id: str, name: str = "fetch") -> dict:
    return {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": call_id, "name": name, "input": {}}],
    }


def answer(call_id: str, content) -> dict:
    return {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": call_id, "content": content}],
    }


def said(text: str = "done") -> dict:
    return {"role": "assistant", "content": [{"type": "text", "text": text}]}


def conversation(sizes: list[int], name: str = "fetch") -> list[dict]:
    """One tool round per size, then three plain replies (so every result is old enough)."""
    messages = [ask()]
    for i, size in enumerate(sizes):
        messages += [call(f"t{i}", name), answer(f"t{i}", (f"{i}:" + "x" * size)[:size])]
    for _ in range(3):
        messages += [said(), ask()]
    return messages


def ids(blocks: list[dict]) -> list[str]:
    return [b["tool_use_id"] for b in blocks]


def test_cold_only_after_the_ttl() -> None:
    assert cache_is_cold(None, 1000.0, 300)
    assert not cache_is_cold(800.0, 1000.0, 300)
    assert cache_is_cold(700.0, 1000.0, 300)


def test_nothing_below_the_soft_ratio() -> None:
    messages = conversation([10_000])
    outcome = plan_pruning(messages, tokens=29_000, window=WINDOW, config=CFG, plan={})
    assert outcome.plan == {} and outcome.removed_chars == 0


def test_soft_trim_keeps_head_and_tail_of_long_results_only() -> None:
    messages = conversation([10_000, 4_000])
    outcome = plan_pruning(messages, tokens=35_000, window=WINDOW, config=CFG, plan={})
    assert outcome.plan == {"t0": "trim"}  # 4,000 chars is not "over 4,000"
    pruned = apply_pruning(messages, ContextPlan(actions=outcome.plan), CFG)
    text = pruned[2]["content"][0]["content"]
    original = messages[2]["content"][0]["content"]
    assert text.startswith(original[:1500] + "\n...\n" + original[-1500:])
    assert "10,000 characters" in text
    assert outcome.removed_chars == len(original) - len(text)
    assert trim_text("short", 1500, 1500) == "short"


def test_hard_clear_oldest_first_until_under_the_hard_ratio() -> None:
    # Twenty 4,000-char results: too short to trim, 80k prunable chars in all.
    messages = conversation([4_000] * 20)
    outcome = plan_pruning(messages, tokens=51_500, window=WINDOW, config=CFG, plan={})
    # Each clear frees ~990 tokens: two bring 51.5k under the 50k line.
    assert outcome.plan == {"t0": "clear", "t1": "clear"}
    pruned = apply_pruning(messages, ContextPlan(actions=outcome.plan), CFG)
    assert pruned[2]["content"][0]["content"] == CLEARED_TEXT
    assert pruned[6] is messages[6]


def test_trimming_that_makes_enough_room_clears_nothing() -> None:
    messages = conversation([40_000, 40_000, 40_000])
    outcome = plan_pruning(messages, tokens=70_000, window=WINDOW, config=CFG, plan={})
    assert outcome.plan == {"t0": "trim", "t1": "trim", "t2": "trim"}
    big = plan_pruning(messages, tokens=95_000, window=WINDOW, config=CFG, plan={})
    assert big.plan == {"t0": "clear", "t1": "clear", "t2": "clear"}


def test_hard_clear_needs_enough_prunable_text() -> None:
    messages = conversation([10_000, 10_000])
    outcome = plan_pruning(messages, tokens=90_000, window=WINDOW, config=CFG, plan={})
    assert set(outcome.plan.values()) == {"trim"}


def test_results_of_the_last_three_assistant_turns_are_never_pruned() -> None:
    messages = [ask()]
    for i in range(3):
        messages += [call(f"t{i}"), answer(f"t{i}", "x" * 50_000)]
    messages.append(said())
    # Four assistant messages: only the results of the oldest one may go.
    assert ids(prunable_results(messages, CFG)) == ["t0"]
    assert prunable_results(messages[:-1], CFG) == []  # all results recent
    outcome = plan_pruning(messages[:-1], tokens=90_000, window=WINDOW, config=CFG, plan={})
    assert outcome.plan == {}


def test_nothing_before_the_first_user_message() -> None:
    # A history cut mid-turn can start with tool results and calls before any user message.
    messages = [answer("t0", "x" * 50_000), ask(), call("t1"), answer("t1", "y" * 50_000)]
    messages += [said(), ask(), said(), ask(), said()]
    assert ids(prunable_results(messages, CFG)) == ["t1"]
    no_user_message = [call("t0"), answer("t0", "x" * 50_000), said(), said(), said()]
    assert prunable_results(no_user_message, CFG) == []


def test_results_with_images_are_never_pruned() -> None:
    image = [{"type": "image", "source": {}}, {"type": "text", "text": "x" * 50_000}]
    messages = conversation([50_000])
    messages[2] = answer("t0", image)
    assert prunable_results(messages, CFG) == []
    pruned = apply_pruning(messages, ContextPlan(actions={"t0": "clear"}), CFG)
    assert pruned[2]["content"][0]["content"] == image


def test_tool_globs_deny_wins() -> None:
    messages = conversation([50_000], name="memory_get") + conversation([50_000], name="web_x")
    for i, m in enumerate(messages):  # make the second copy's ids unique
        if i >= len(messages) // 2:
            for b in m["content"]:
                if "id" in b:
                    b["id"] = "w" + b["id"]
                if "tool_use_id" in b:
                    b["tool_use_id"] = "w" + b["tool_use_id"]
    allow_web = ContextConfig(prune_tools_allow=["web_*"])
    assert ids(prunable_results(messages, allow_web)) == ["wt0"]
    deny_memory = ContextConfig(prune_tools_allow=["*"], prune_tools_deny=["memory_*"])
    assert ids(prunable_results(messages, deny_memory)) == ["wt0"]
    both = ContextConfig(prune_tools_allow=["web_*"], prune_tools_deny=["web_*"])
    assert prunable_results(messages, both) == []


def test_a_kept_plan_makes_the_prefix_byte_identical() -> None:
    messages = conversation([20_000, 20_000])
    plan = plan_pruning(messages, tokens=40_000, window=WINDOW, config=CFG, plan={}).plan
    first = apply_pruning(messages, ContextPlan(actions=plan), CFG)
    # The conversation goes on while the cache is warm: no new decisions, same prefix.
    later = [*messages, said("more"), ask("next")]
    second = apply_pruning(later, ContextPlan(actions=plan), CFG)
    assert json.dumps(second[: len(first)]) == json.dumps(first)
    # Earlier decisions survive a later cold pass, which only adds to them.
    extended = plan_pruning(later, tokens=60_000, window=WINDOW, config=CFG, plan=plan)
    assert all(extended.plan[k] in ("trim", "clear") for k in plan)
    assert plan_pruning(later, tokens=10, window=WINDOW, config=CFG, plan=plan).plan == plan


def test_tool_globs_ignore_case() -> None:
    messages = conversation([50_000], name="Web_Fetch")
    assert ids(prunable_results(messages, ContextConfig(prune_tools_allow=["web_*"]))) == ["t0"]
    assert prunable_results(messages, ContextConfig(prune_tools_deny=["WEB_FETCH"])) == []


def test_an_empty_allow_list_admits_every_tool_and_deny_still_wins() -> None:
    messages = conversation([50_000, 50_000], name="mcp__files")
    open_list = ContextConfig(prune_tools_allow=[])
    assert ids(prunable_results(messages, open_list)) == ["t0", "t1"]
    denied = ContextConfig(prune_tools_allow=[], prune_tools_deny=["MCP__*"])
    assert prunable_results(messages, denied) == []
