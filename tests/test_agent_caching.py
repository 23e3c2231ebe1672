"""Prompt-cache breakpoint placement."""

from __future__ import annotations

from bot.agent.caching import MAX_BREAKPOINTS, apply_breakpoints


def count(system, tools, messages) -> int:
    n = sum("cache_control" in b for b in system) + sum("cache_control" in t for t in tools)
    for m in messages:
        if isinstance(m["content"], list):
            n += sum("cache_control" in b for b in m["content"])
    return n


def test_breakpoints_on_tools_system_last_and_previous_user() -> None:
    system = [{"type": "text", "text": "sys"}]
    tools = [{"name": "a"}, {"name": "b"}]
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "q1"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "a1"}]},
        {"role": "user", "content": "q2"},
    ]
    s, t, m = apply_breakpoints(system=system, tools=tools, messages=messages, ttl="1h")
    assert count(s, t, m) == MAX_BREAKPOINTS
    assert (
        t[-1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"} and "cache_control" not in t[0]
    )
    assert m[2]["content"][0]["cache_control"]["ttl"] == "1h"
    assert "cache_control" in m[0]["content"][-1]
    # Inputs are not modified.
    assert "cache_control" not in tools[-1] and messages[2]["content"] == "q2"


def test_never_more_than_four() -> None:
    messages = [
        {"role": r, "content": [{"type": "text", "text": r}]} for r in ["user", "assistant"] * 5
    ]
    s, t, m = apply_breakpoints(
        system=[{"type": "text", "text": "s"}], tools=[{"name": "x"}], messages=messages, ttl="5m"
    )
    assert count(s, t, m) <= MAX_BREAKPOINTS
