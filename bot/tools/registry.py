"""The tool registry: what the model may call, its JSON schema, and the policy that filters it.

Tools register a handler; the agent loop runs them and pairs each result with its call id.
A handler raising `ToolError` (or anything else) becomes an error result the model can read,
and a call that keeps failing with the same input is cut off instead of run again.
"""

from __future__ import annotations

import asyncio
import fnmatch
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from anthropic.types import ToolResultBlockParam, ToolUnionParam, ToolUseBlockParam
from anthropic.types.tool_result_block_param import Content as ResultContent

from bot.types import Address, SessionOrigin

log = logging.getLogger(__name__)

# The same call (name and input) failing this many times in one turn is not run again.
MAX_IDENTICAL_FAILURES = 2
REPEATED_FAILURE = (
    "Error: not run. This exact call to {name} already failed {count} times in this turn; "
    "change the input, try something else, or tell the person what is failing."
)


class ToolError(Exception):
    """A failure the model should read as the tool's result."""


def positive_int_arg(args: dict[str, Any], key: str, default: int) -> int:
    """`args[key]` as a whole number of at least 1 (`default` when absent); a ToolError
    the model can act on otherwise."""
    value = args.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 1:
        raise ToolError(f"{key} must be a whole number of at least 1")
    return int(value)


@dataclass(slots=True)
class ToolContext:
    """What a tool may know about the turn it runs in."""

    session_key: str
    session_id: str
    principal: str
    is_direct: bool
    workspace: Path
    turn_id: str = ""
    # Where the session's conversation is (its row's origin; None on rows older than
    # origins) and whether everyone the turn answers is an admin: memory scopes need both.
    origin: SessionOrigin | None = None
    admin: bool = False
    # Where the turn's reply goes (None for turns that answer nobody, like a flush).
    address: Address | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # Failed calls of this turn by signature (name + input), for cutting off repeats.
    failures: dict[str, int] = field(default_factory=dict)


# Which workspace file a tool call may read (`bot.memory.access.readable`, the one place
# that decides): the file's real path for a workspace-relative path, or a ToolError saying
# why not. Tools that read a path the model names take it in their constructor.
WorkspaceGate = Callable[[ToolContext, str], Path]

ToolResultContent = str | list[ResultContent]
ToolHandler = Callable[[dict[str, Any], ToolContext], Awaitable[ToolResultContent]]


@dataclass(slots=True)
class Tool:
    name: str
    description: str
    input_schema: dict[str, Any]
    handler: ToolHandler
    timeout: float = 60.0
    # Set for tools that return outside content (web pages, MCP servers): the result hook
    # wraps their output as untrusted, naming this source.
    untrusted_source: str = ""
    # Set for a tool the provider runs itself (server-side web search): requests carry this
    # definition, and the model's calls of it never reach `handler`.
    server: ToolUnionParam | None = None

    def definition(self) -> ToolUnionParam:
        if self.server is not None:
            return self.server
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
        }


@dataclass(slots=True)
class ToolResult:
    tool_use_id: str
    content: ToolResultContent
    is_error: bool = False

    def block(self) -> ToolResultBlockParam:
        block: ToolResultBlockParam = {
            "type": "tool_result",
            "tool_use_id": self.tool_use_id,
            "content": self.content,
        }
        if self.is_error:
            block["is_error"] = True
        return block


def tool_allowed(name: str, allow: Sequence[str], deny: Sequence[str]) -> bool:
    """Glob policy: a name must match an allow pattern and no deny pattern (deny wins)."""
    if any(fnmatch.fnmatchcase(name, pattern) for pattern in deny):
        return False
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in allow)


class ToolFilter(Protocol):
    """A session's tool policy (see `bot.tools.policy.ToolPolicy`)."""

    def allows(self, name: str) -> bool: ...


# Post-processes every result a handler produced (large-result storage, untrusted wrapping).
ResultHook = Callable[[Tool, ToolResult, ToolContext], Awaitable[ToolResult]]


def call_signature(name: str, args: Any) -> str:
    """A stable key for "the same call": tool name plus canonical JSON of the input."""
    return name + "\x00" + json.dumps(args, sort_keys=True, ensure_ascii=False, default=str)


class ToolRegistry:
    def __init__(self, result_hook: ResultHook | None = None) -> None:
        self._tools: dict[str, Tool] = {}
        self.result_hook = result_hook

    def register(self, tool: Tool) -> None:
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} registered twice")
        self._tools[tool.name] = tool

    def unregister(self, name: str) -> None:
        self._tools.pop(name, None)

    def names(self) -> list[str]:
        return sorted(self._tools)

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def definitions(
        self,
        allow: Sequence[str] = ("*",),
        deny: Sequence[str] = (),
        *,
        policy: ToolFilter | None = None,
    ) -> list[ToolUnionParam]:
        allowed = _allowed(allow, deny, policy)
        # Sorted so the tools block (the start of the cached prefix) is byte-stable.
        return [self._tools[n].definition() for n in self.names() if allowed(n)]

    async def run(
        self,
        call: ToolUseBlockParam,
        ctx: ToolContext,
        allow: Sequence[str] = ("*",),
        deny: Sequence[str] = (),
        *,
        policy: ToolFilter | None = None,
    ) -> ToolResult:
        name = call.get("name", "")
        call_id = call.get("id", "")
        signature = call_signature(name, call.get("input"))
        failed = ctx.failures.get(signature, 0)
        if failed >= MAX_IDENTICAL_FAILURES:
            return ToolResult(call_id, REPEATED_FAILURE.format(name=name, count=failed), True)
        result = await self._run(call, ctx, _allowed(allow, deny, policy))
        if result.is_error:
            ctx.failures[signature] = ctx.failures.get(signature, 0) + 1
        return result

    async def _run(
        self, call: ToolUseBlockParam, ctx: ToolContext, allowed: Callable[[str], bool]
    ) -> ToolResult:
        name = call.get("name", "")
        call_id = call.get("id", "")
        tool = self._tools.get(name)
        if tool is None or not allowed(name):
            return ToolResult(call_id, f"Error: tool {name!r} is not available here.", True)
        args = call.get("input") or {}
        if not isinstance(args, dict):
            return ToolResult(call_id, "Error: tool input must be a JSON object.", True)
        try:
            content = await asyncio.wait_for(tool.handler(args, ctx), timeout=tool.timeout)
        except ToolError as exc:
            return await self._finish(tool, ToolResult(call_id, f"Error: {exc}", True), ctx)
        except TimeoutError:
            return ToolResult(call_id, f"Error: {name} timed out after {tool.timeout:.0f}s.", True)
        except Exception as exc:  # a broken tool must not break the turn
            log.exception("tool %s failed", name)
            return ToolResult(call_id, f"Error: {name} failed: {type(exc).__name__}: {exc}", True)
        if not isinstance(content, str | list):
            content = json.dumps(content, ensure_ascii=False)
        return await self._finish(tool, ToolResult(call_id, content), ctx)

    async def _finish(self, tool: Tool, result: ToolResult, ctx: ToolContext) -> ToolResult:
        if self.result_hook is None:
            return result
        try:
            return await self.result_hook(tool, result, ctx)
        except Exception as exc:
            # Never fall back to the raw result: it may be unwrapped outside content.
            log.exception("processing the result of %s failed", tool.name)
            error = f"Error: the result of {tool.name} could not be processed: {exc}"
            return ToolResult(result.tool_use_id, error, True)


def _allowed(
    allow: Sequence[str], deny: Sequence[str], policy: ToolFilter | None
) -> Callable[[str], bool]:
    if policy is not None:
        return policy.allows
    return lambda name: tool_allowed(name, allow, deny)
