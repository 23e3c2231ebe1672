"""Tool loop hygiene in the registry: parallel calls, error results, repeated failures cut off."""

from __future__ import annotations

import asyncio
from pathlib import Path

from bot.tools.policy import PolicyLayer, ToolPolicy
from bot.tools.registry import (
    MAX_IDENTICAL_FAILURES,
    ResultHook,
    Tool,
    ToolContext,
    ToolError,
    ToolRegistry,
    ToolResult,
)


def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext("key", "sid", "local:t", True, tmp_path, turn_id="turn1")


def registry_with_tools(result_hook: ResultHook | None = None) -> tuple[ToolRegistry, list[str]]:
    registry = ToolRegistry(result_hook)
    runs: list[str] = []

    async def flaky(args: dict, ctx: ToolContext) -> str:
        runs.append(args["q"])
        raise ToolError(f"no result for {args['q']}")

    async def slow(args: dict, ctx: ToolContext) -> str:
        await asyncio.sleep(0.2)
        return f"slow {args['n']}"

    async def broken(args: dict, ctx: ToolContext) -> str:
        raise RuntimeError("bug")

    registry.register(Tool("flaky", "fails", {"type": "object"}, flaky))
    registry.register(Tool("slow", "sleeps", {"type": "object"}, slow))
    registry.register(Tool("broken", "raises", {"type": "object"}, broken))
    return registry, runs


async def test_identical_failing_calls_are_cut_off(tmp_path: Path) -> None:
    registry, runs = registry_with_tools()
    turn = ctx(tmp_path)
    results = [
        await registry.run({"id": f"c{i}", "name": "flaky", "input": {"q": "a"}}, turn)
        for i in range(4)
    ]
    assert all(r.is_error for r in results)
    assert runs == ["a"] * MAX_IDENTICAL_FAILURES
    assert "already failed 2 times in this turn" in str(results[-1].content)
    # A different input is a different call; a new turn starts afresh.
    other = await registry.run({"id": "d", "name": "flaky", "input": {"q": "b"}}, turn)
    assert "no result for b" in str(other.content)
    again = await registry.run({"id": "e", "name": "flaky", "input": {"q": "a"}}, ctx(tmp_path))
    assert "no result for a" in str(again.content)


async def test_parallel_calls_run_concurrently_and_keep_their_ids(tmp_path: Path) -> None:
    registry, _ = registry_with_tools()
    calls = [{"id": f"c{n}", "name": "slow", "input": {"n": n}} for n in range(5)]
    started = asyncio.get_running_loop().time()
    results = await asyncio.gather(*(registry.run(c, ctx(tmp_path)) for c in calls))
    assert asyncio.get_running_loop().time() - started < 0.6
    assert [(r.tool_use_id, r.content) for r in results] == [
        (f"c{n}", f"slow {n}") for n in range(5)
    ]


async def test_exceptions_and_policy_become_error_results(tmp_path: Path) -> None:
    registry, _ = registry_with_tools()
    broken = await registry.run({"id": "b", "name": "broken", "input": {}}, ctx(tmp_path))
    assert broken == ToolResult("b", "Error: broken failed: RuntimeError: bug", True)
    policy = ToolPolicy((PolicyLayer("tools", deny=("slow",)),))
    refused = await registry.run(
        {"id": "s", "name": "slow", "input": {"n": 1}}, ctx(tmp_path), policy=policy
    )
    assert refused.is_error and "not available" in str(refused.content)
    assert [d["name"] for d in registry.definitions(policy=policy)] == ["broken", "flaky"]


async def test_a_failing_result_hook_never_leaks_the_raw_result(tmp_path: Path) -> None:
    async def hook(tool: Tool, result: ToolResult, ctx: ToolContext) -> ToolResult:
        raise OSError("disk on fire")

    registry, _ = registry_with_tools(hook)
    result = await registry.run({"id": "s", "name": "slow", "input": {"n": 1}}, ctx(tmp_path))
    assert result.is_error and "could not be processed" in str(result.content)
    assert "slow 1" not in str(result.content)


async def test_a_call_marked_confirm_is_offered_for_approval_not_run(tmp_path: Path) -> None:
    asked: list[str] = []

    async def ask(call: dict, ctx: ToolContext) -> ToolResult:
        asked.append(call["id"])
        return ToolResult(call["id"], "waiting for approval")

    registry = ToolRegistry(confirm_hook=ask)
    runs: list[dict] = []

    async def send(args: dict, ctx: ToolContext) -> str:
        runs.append(args)
        return "sent"

    registry.register(Tool("send_file", "sends", {"type": "object"}, send))
    policy = ToolPolicy((PolicyLayer("tools"),), confirm=("send_file",))
    call = {"id": "c1", "name": "send_file", "input": {"path": "a.txt"}}
    waiting = await registry.run(call, ctx(tmp_path), policy=policy)
    assert (waiting.content, asked, runs) == ("waiting for approval", ["c1"], [])
    ran = await registry.run(call, ctx(tmp_path), policy=policy, approved=True)
    assert ran.content == "sent" and runs == [{"path": "a.txt"}]
    # Where nothing can ask (no hook), the call is refused, never run unasked.
    unasked = ToolRegistry()
    unasked.register(Tool("send_file", "sends", {"type": "object"}, send))
    refused = await unasked.run(call, ctx(tmp_path), policy=policy)
    assert refused.is_error and "needs the approval" in str(refused.content)
    assert len(runs) == 1
