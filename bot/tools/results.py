"""Tool results on their way to the model: big ones are kept whole on disk and previewed,
outside content is wrapped as untrusted, and `read_tool_result` pages through what was kept.

Every tool's result passes through `ResultProcessor.process` (the registry's result hook),
before the context pipeline caps single results, so a big output is recoverable rather than
cut. Files live in `<workspace>/tool-results/<YYYY-MM-DD>/<owner>/<id>.txt`, where the owner
folder names the conversation (session key) that produced them: a result can hold another
conversation's memory or a page fetched for one person, so only its own conversation (or an
admin's DM) reads or sends it back (`bot.memory.access` decides). They are removed after
`tools.results.keep_days`.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import re
import secrets
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from bot.config import ToolResultsConfig
from bot.tools.registry import (
    Tool,
    ToolContext,
    ToolError,
    ToolResult,
    WorkspaceGate,
    positive_int_arg,
)
from bot.untrusted import clean_name, marker_id_for, wrap_untrusted

log = logging.getLogger(__name__)

RESULTS_DIR = "tool-results"
RESULT_ID_BYTES = 6  # 12 hex characters
RESULT_ID_RE = re.compile(r"[0-9a-f]{12}")
DATE_FORMAT = "%Y-%m-%d"
# Longer lines are split into display lines, so minified JSON or a one-line page can still
# be read in pieces; 2000 chars are at most 8000 UTF-8 bytes, below every allowed budget.
MAX_LINE_CHARS = 2_000
# Room left under the threshold for the notice and the untrusted markers around a preview.
NOTICE_RESERVE_BYTES = 1_000
CLEANUP_INTERVAL_SECONDS = 3_600.0
READ_TOOL_NAME = "read_tool_result"
READ_SOURCE = "tool-result"

NOTICE = (
    "[Large result: {size}, {total} lines; showing lines 1-{shown}. The whole output is kept "
    'as tool result {id} ({path}). Read more with read_tool_result(id="{id}", '
    "from_line={next}, lines={lines}).]"
)
UNSAVED_NOTICE = (
    "[Large result: {size}, {total} lines; showing lines 1-{shown}. It could not be kept on "
    "disk ({error}), so only this preview is available.]"
)


def split_lines(text: str) -> list[str]:
    """Display lines: physical lines, with any longer than MAX_LINE_CHARS cut into pieces."""
    lines: list[str] = []
    for line in text.split("\n"):
        if len(line) <= MAX_LINE_CHARS:
            lines.append(line)
        else:
            lines.extend(line[i : i + MAX_LINE_CHARS] for i in range(0, len(line), MAX_LINE_CHARS))
    return lines


def take_lines(lines: Sequence[str], start: int, count: int, max_bytes: int) -> list[str]:
    """Up to `count` lines from index `start` whose UTF-8 size (with newlines) fits `max_bytes`.

    The first line is always taken, so paging makes progress whatever the budget.
    """
    taken: list[str] = []
    size = 0
    for line in lines[start : start + count]:
        size += len(line.encode()) + 1
        if taken and size > max_bytes:
            break
        taken.append(line)
    return taken


def result_owner(session_key: str) -> str:
    """The folder a conversation's kept results go in: its session key as one path segment
    (keys never start with "."; "/" and ":" are percent-encoded)."""
    return quote(session_key, safe="")


def format_size(size: int) -> str:
    return f"{size / 1000:.1f} KB ({size:,} bytes)"


def expired_dirs(names: Sequence[str], today: dt.date, keep_days: int) -> list[str]:
    """Date folders (YYYY-MM-DD) older than `keep_days`; other names are left alone."""
    oldest = today - dt.timedelta(days=keep_days)
    expired = []
    for name in names:
        try:
            day = dt.datetime.strptime(name, DATE_FORMAT).date()
        except ValueError:
            continue
        if day < oldest:
            expired.append(name)
    return expired


@dataclass(frozen=True, slots=True)
class StoredResult:
    id: str
    path: Path


class ResultStore:
    """The folder of kept results: save, find, read back, clean up."""

    def __init__(
        self,
        workspace: Path,
        config: ToolResultsConfig,
        *,
        today: Callable[[], dt.date] = lambda: dt.datetime.now(dt.UTC).date(),
    ):
        self.root = workspace / RESULTS_DIR
        self.workspace = workspace
        self.config = config
        self.today = today

    def save(self, text: str, session_key: str) -> StoredResult:
        """Write `text` whole, as `session_key`'s; raises OSError when the disk refuses."""
        result_id = secrets.token_hex(RESULT_ID_BYTES)
        folder = self.root / self.today().strftime(DATE_FORMAT) / result_owner(session_key)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{result_id}.txt"
        path.write_text(text, encoding="utf-8")
        return StoredResult(result_id, path)

    def find(self, result_id: str) -> Path | None:
        if not RESULT_ID_RE.fullmatch(result_id):
            return None  # also keeps path tricks out of the glob below
        # Results kept before owner folders sit directly in the date folder.
        found = [*self.root.glob(f"*/*/{result_id}.txt"), *self.root.glob(f"*/{result_id}.txt")]
        return min(found, default=None)

    def cleanup(self) -> int:
        """Remove date folders older than keep_days; returns how many were removed."""
        if not self.root.is_dir():
            return 0
        names = [p.name for p in self.root.iterdir() if p.is_dir()]
        removed = 0
        for name in expired_dirs(names, self.today(), self.config.keep_days):
            shutil.rmtree(self.root / name, ignore_errors=True)
            removed += 1
        return removed

    def relative(self, path: Path) -> str:
        return str(path.relative_to(self.workspace))


class ResultProcessor:
    """The registry's result hook, and the `read_tool_result` tool over the same store."""

    def __init__(self, store: ResultStore, gate: WorkspaceGate):
        self.store = store
        self.config = store.config
        self.gate = gate

    @property
    def body_budget(self) -> int:
        """Bytes a preview or a read may use so the whole result stays under the threshold."""
        return self.config.threshold_bytes - NOTICE_RESERVE_BYTES

    async def process(self, tool: Tool, result: ToolResult, ctx: ToolContext) -> ToolResult:
        content = result.content
        # Error texts are short and written by us (tools wrap any outside text in them).
        if result.is_error or not isinstance(content, str):
            return result
        marker = marker_id_for(result.tool_use_id or ctx.turn_id)
        size = len(content.encode())
        if size <= self.config.threshold_bytes:
            if tool.untrusted_source:
                content = wrap_untrusted(content, source=tool.untrusted_source, marker_id=marker)
            return ToolResult(result.tool_use_id, content)
        lines = split_lines(content)
        budget = min(self.config.preview_bytes, self.body_budget)
        preview = take_lines(lines, 0, self.config.preview_lines, budget)
        fields: dict[str, Any] = {"size": format_size(size), "total": len(lines)}
        fields["shown"] = len(preview)
        try:
            stored = await asyncio.to_thread(self.store.save, content, ctx.session_key)
        except OSError as exc:
            log.error("could not keep a %s result on disk: %s", tool.name, exc)
            notice = UNSAVED_NOTICE.format(error=type(exc).__name__, **fields)
        else:
            log.info("kept a %s result of %d bytes as %s", tool.name, size, stored.id)
            notice = NOTICE.format(
                id=stored.id,
                path=self.store.relative(stored.path),
                next=len(preview) + 1,
                lines=self.config.preview_lines,
                **fields,
            )
        body = "\n".join(preview)
        if tool.untrusted_source:
            body = wrap_untrusted(body, source=tool.untrusted_source, marker_id=marker)
        return ToolResult(result.tool_use_id, f"{notice}\n{body}")

    async def read(self, args: dict[str, Any], ctx: ToolContext) -> str:
        """`read_tool_result(id, from_line, lines)`: a page of a kept result."""
        result_id = str(args.get("id", "")).strip()
        from_line = positive_int_arg(args, "from_line", 1)
        count = positive_int_arg(args, "lines", self.config.preview_lines)
        found = self.store.find(result_id)
        try:
            # Another conversation's result reads as missing: its id tells this one nothing.
            path = self.gate(ctx, self.store.relative(found)) if found else None
        except ToolError:
            path = None
        if path is None:
            raise ToolError(
                f"no kept tool result with id {clean_name(result_id)!r} in this conversation "
                f"(results are kept {self.config.keep_days} days)"
            )
        text = await asyncio.to_thread(path.read_text, encoding="utf-8")
        lines = split_lines(text)
        if from_line > len(lines):
            raise ToolError(f"tool result {result_id} has only {len(lines)} lines")
        page = take_lines(lines, from_line - 1, count, self.body_budget)
        last = from_line + len(page) - 1
        more = (
            f' Next: read_tool_result(id="{result_id}", from_line={last + 1}, lines={count}).'
            if last < len(lines)
            else " That is the end."
        )
        header = f"[Tool result {result_id}: lines {from_line}-{last} of {len(lines)}.{more}]"
        return header + "\n" + "\n".join(page)

    def read_tool(self) -> Tool:
        return Tool(
            name=READ_TOOL_NAME,
            description=(
                "Read part of a large tool result that was kept on disk. Large results show "
                "only a preview and an id; use this to read further lines."
            ),
            input_schema={
                "type": "object",
                "properties": {
                    "id": {"type": "string", "description": "The id from the preview notice."},
                    "from_line": {"type": "integer", "minimum": 1, "default": 1},
                    "lines": {
                        "type": "integer",
                        "minimum": 1,
                        "default": self.config.preview_lines,
                    },
                },
                "required": ["id"],
            },
            handler=self.read,
            # Kept results are mostly outside content (web pages, MCP output).
            untrusted_source=READ_SOURCE,
        )


async def remove_expired(store: ResultStore) -> int:
    """Remove expired result folders (the scheduler runs this every CLEANUP_INTERVAL_SECONDS)."""
    removed = await asyncio.to_thread(store.cleanup)
    if removed:
        log.info("removed %d expired tool-result folder(s)", removed)
    return removed
