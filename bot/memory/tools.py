"""The memory tools the model gets: memory_search, memory_get and memory_append.

Each sees only what its session's scope may (`bot.memory.scopes`: search filters in the
index query, get reads through `bot.memory.access` like every tool that reads a workspace
path, append refuses other files), only an admin's DM may append to MEMORY.md, and every
path is checked by `bot.memory.paths` before a file is touched. Search and get
results are marked as untrusted content (the registry's result hook wraps them), because
notes can quote what people said in chats.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import errno
import logging
from collections.abc import Callable
from typing import Any
from zoneinfo import ZoneInfo

from bot.config import MemoryConfig
from bot.memory.access import readable
from bot.memory.index import MemoryIndex, SearchHit
from bot.memory.notes import MemoryFull, append_entry
from bot.memory.paths import CURATED_FILE, MemoryPathError, resolve_memory_path
from bot.memory.scopes import OPERATOR, MemoryScope, scope_of, visible_scopes, writable
from bot.tools.registry import Tool, ToolContext, ToolError, ToolRegistry
from bot.untrusted import clean_name, sanitize

log = logging.getLogger(__name__)

UNTRUSTED_SOURCE = "memory"
MAX_SEARCH_RESULTS = 20
DEFAULT_GET_LINES = 60
MAX_GET_LINES = 300
MAX_GET_CHARS = 20_000
DAILY = "daily"
CURATED_ADMINS_ONLY = (
    f'only an admin\'s direct messages may append to {CURATED_FILE}; use file="{DAILY}"'
)

SEARCH_DESCRIPTION = (
    "Search long-term memory (the notes this conversation may see) by keywords. Use it "
    "before answering questions about earlier conversations, people, preferences, decisions, "
    "dates or to-dos. Returns snippets with their source as path#Lstart-Lend; read more "
    "around a hit with memory_get."
)
GET_DESCRIPTION = (
    "Read lines of a memory file, as memory_search cites it: MEMORY.md or memory/<name>.md. "
    "Other paths, and notes of other conversations, are refused."
)
APPEND_DESCRIPTION = (
    "Write something down for later: appends a dated entry to this conversation's daily "
    'note (file="daily", the default), or, in an admin\'s direct messages, to MEMORY.md for '
    "durable facts, preferences and decisions. It only appends; nothing is ever "
    "overwritten. Keep entries short; never store secrets."
)


def format_hits(hits: list[SearchHit]) -> str:
    """Snippets with their sources, best first; the text recall and memory_search share."""
    return "\n\n".join(f"{h.source} (score {h.score:.2f})\n{h.text}" for h in hits)


def write_failure(exc: OSError) -> str:
    """The tool error for a failed write, naming the cause but not the host's paths."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        cause = "the disk is full"
    elif exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        cause = "the workspace is read-only"
    else:
        cause = exc.strerror or type(exc).__name__
    return (
        f"nothing was written: {cause}. The note is not saved; tell the person, and that "
        "the operator needs to fix the workspace."
    )


def scope_for(ctx: ToolContext) -> MemoryScope:
    """The scope of the tool call's session; a malformed key fails closed."""
    try:
        return scope_of(ctx.origin, ctx.session_key)
    except ValueError:
        raise ToolError("memory is not available in this conversation") from None


def _int_arg(args: dict[str, Any], name: str, default: int, low: int, high: int) -> int:
    value = args.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ToolError(f"{name} must be a whole number")
    try:
        number = int(value)
    except ValueError:
        raise ToolError(f"{name} must be a whole number, got {value!r}") from None
    return max(low, min(high, number))


class MemoryTools:
    """Tool handlers bound to one index and workspace configuration."""

    def __init__(
        self,
        index: MemoryIndex,
        config: MemoryConfig,
        timezone: str,
        *,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.index = index
        self.config = config
        self.zone = ZoneInfo(timezone)
        self._clock = clock

    def now(self) -> dt.datetime:
        if self._clock is None:
            return dt.datetime.now(self.zone)
        return dt.datetime.fromtimestamp(self._clock(), self.zone)

    def register(self, registry: ToolRegistry) -> None:
        registry.register(
            Tool(
                "memory_search",
                SEARCH_DESCRIPTION,
                {
                    "type": "object",
                    "properties": {
                        "query": {"type": "string", "description": "words to look for"},
                        "max_results": {
                            "type": "integer",
                            "minimum": 1,
                            "maximum": MAX_SEARCH_RESULTS,
                            "description": f"default {self.config.search.max_results}",
                        },
                    },
                    "required": ["query"],
                },
                self.search,
                untrusted_source=UNTRUSTED_SOURCE,
            )
        )
        registry.register(
            Tool(
                "memory_get",
                GET_DESCRIPTION,
                {
                    "type": "object",
                    "properties": {
                        "path": {"type": "string", "description": "MEMORY.md or memory/<name>.md"},
                        "from_line": {"type": "integer", "minimum": 1, "description": "default 1"},
                        "lines": {
                            "type": "integer",
                            "minimum": 1,
                            "maximum": MAX_GET_LINES,
                            "description": f"default {DEFAULT_GET_LINES}",
                        },
                    },
                    "required": ["path"],
                },
                self.get,
                untrusted_source=UNTRUSTED_SOURCE,
            )
        )
        registry.register(
            Tool(
                "memory_append",
                APPEND_DESCRIPTION,
                {
                    "type": "object",
                    "properties": {
                        "text": {"type": "string", "description": "the entry to add"},
                        "file": {"type": "string", "enum": [DAILY, CURATED_FILE]},
                    },
                    "required": ["text"],
                },
                self.append,
            )
        )

    async def search(self, args: dict[str, Any], ctx: ToolContext) -> str:
        query = str(args.get("query") or "").strip()
        if not query:
            raise ToolError("query is empty; pass the words to look for")
        limit = _int_arg(args, "max_results", self.config.search.max_results, 1, MAX_SEARCH_RESULTS)
        visible = visible_scopes(scope_for(ctx), admin=ctx.admin)
        hits = await self.index.search(query, visible, max_results=limit)
        if not hits:
            return f"No memory matches {query!r}."
        return f"{len(hits)} result(s) for {query!r}:\n\n{format_hits(hits)}"

    async def get(self, args: dict[str, Any], ctx: ToolContext) -> str:
        raw = str(args.get("path") or "")
        try:
            name, _ = resolve_memory_path(ctx.workspace, raw)
        except MemoryPathError as exc:
            raise ToolError(sanitize(str(exc))) from None
        real = readable(ctx, name)
        first = _int_arg(args, "from_line", 1, 1, 10**9)
        count = _int_arg(args, "lines", DEFAULT_GET_LINES, 1, MAX_GET_LINES)
        try:
            text = await asyncio.to_thread(real.read_text, encoding="utf-8", errors="replace")
        except FileNotFoundError:  # removed since the check
            raise ToolError(f"{clean_name(name)} does not exist") from None
        lines = text.splitlines()
        if first > len(lines):
            return f"{name} has {len(lines)} line(s); nothing at line {first}."
        chosen = lines[first - 1 : first - 1 + count]
        excerpt = "\n".join(chosen)[:MAX_GET_CHARS]
        last = first + len(chosen) - 1
        return f"{name}#L{first}-L{last} (of {len(lines)} lines)\n{excerpt}"

    async def append(self, args: dict[str, Any], ctx: ToolContext) -> str:
        text = str(args.get("text") or "").strip()
        if not text:
            raise ToolError("text is empty; nothing was written")
        limit = self.config.append_max_chars
        if len(text) > limit:
            raise ToolError(f"text is {len(text)} chars; one entry may hold at most {limit}")
        target = str(args.get("file") or DAILY).strip()
        if target not in (DAILY, CURATED_FILE):
            raise ToolError(f'file must be "{DAILY}" or "{CURATED_FILE}", got {target!r}')
        scope = scope_for(ctx)
        if target == CURATED_FILE:
            # Nobody else may plant "facts" in the operator's curated memory.
            if not (ctx.admin and scope.is_direct):
                raise ToolError(CURATED_ADMINS_ONLY)
            scope = OPERATOR
        now = self.now()
        name = target if target == CURATED_FILE else scope.daily_note(now)
        try:
            done = await asyncio.to_thread(
                append_entry,
                ctx.workspace,
                name,
                text,
                now=now,
                max_file_bytes=self.config.file_max_bytes,
                writable=writable(scope),
            )
        except (MemoryPathError, MemoryFull) as exc:
            raise ToolError(sanitize(str(exc))) from None
        except OSError as exc:
            # A read-only workspace or a full disk: the operator must fix it, and the model
            # should tell the person the note was not kept rather than claim it was.
            log.warning("memory_append could not write to the workspace: %s", exc)
            raise ToolError(write_failure(exc)) from None
        return f"Appended to {done.source}."
