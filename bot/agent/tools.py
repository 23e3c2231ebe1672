"""The tool registry: what the model may call, its JSON schema, and the policy that filters it.

Tools register a handler; the agent loop runs them and pairs each result with its call id.
A handler raising `ToolError` (or anything else) becomes an error result the model can read.
"""

from __future__ import annotations

import asyncio
import fnmatch
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


class ToolError(Exception):
    """A failure the model should read as the tool's result."""


@dataclass(slots=True)
class ToolContext:
    """What a tool may know about the turn it runs in."""

    session_key: str
    session_id: str
    principal: str
    is_direct: bool
    workspace: Path
    turn_id: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


ToolResultContent = str | list[dict[str, Any]]
ToolHandler = Callable[[dict[str, Any], ToolContext], Awaitable[ToolResultContent]]


@dataclass(slots=True)
class Tool:
    name: str
    description: str
    input_schema: dict[str, Any]
    handler: ToolHandler
    timeout: float = 60.0

    def definition(self) -> dict[str, Any]:
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

    def block(self) -> dict[str, Any]:
        block: dict[str, Any] = {
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


class ToolRegistry:
    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}

    def register(self, tool: Tool) -> None:
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} registered twice")
        self._tools[tool.name] = tool

    def unregister(self, name: str) -> None:
        self._tools.pop(name, None)

    def names(self) -> list[str]:
        return sorted(self._tools)

    def definitions(self, allow: Sequence[str] = ("*",), deny: Sequence[str] = ()) -> list[dict]:
        # Sorted so the tools block (the start of the cached prefix) is byte-stable.
        return [self._tools[n].definition() for n in self.names() if tool_allowed(n, allow, deny)]

    async def run(
        self,
        call: dict[str, Any],
        ctx: ToolContext,
        allow: Sequence[str] = ("*",),
        deny: Sequence[str] = (),
    ) -> ToolResult:
        name = call.get("name", "")
        call_id = call.get("id", "")
        tool = self._tools.get(name)
        if tool is None or not tool_allowed(name, allow, deny):
            return ToolResult(call_id, f"Error: tool {name!r} is not available here.", True)
        args = call.get("input") or {}
        if not isinstance(args, dict):
            return ToolResult(call_id, "Error: tool input must be a JSON object.", True)
        try:
            content = await asyncio.wait_for(tool.handler(args, ctx), timeout=tool.timeout)
        except ToolError as exc:
            return ToolResult(call_id, f"Error: {exc}", True)
        except TimeoutError:
            return ToolResult(call_id, f"Error: {name} timed out after {tool.timeout:.0f}s.", True)
        except Exception as exc:  # a broken tool must not break the turn
            log.exception("tool %s failed", name)
            return ToolResult(call_id, f"Error: {name} failed: {type(exc).__name__}: {exc}", True)
        if not isinstance(content, str | list):
            content = json.dumps(content, ensure_ascii=False)
        return ToolResult(call_id, content)
