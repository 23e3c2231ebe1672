"""Tests for bot.memory.paths, bot.memory.notes and bot.memory.tools: path escapes, group
privacy, dated appends and appends racing each other. (Scopes: tests/test_memory_scopes.py.)"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from bot.config import MemoryConfig
from bot.memory.index import MemoryIndex
from bot.memory.notes import MemoryFull, append_entry, format_entry
from bot.memory.paths import MemoryPathError, normalize_memory_path
from bot.memory.scopes import OPERATOR, writable
from bot.memory.tools import MemoryTools
from bot.store.base import Store
from bot.tools.registry import ToolContext, ToolError, ToolRegistry

# 2025-03-14 23:30 UTC is already the 15th in Tokyo.
FIXED = dt.datetime(2025, 3, 14, 23, 30, tzinfo=dt.UTC).timestamp()

ESCAPES = [
    "../secret.md",
    "/etc/passwd",
    "memory/../../outside.md",
    "memory/../MEMORY.md",
    "memory/notes.txt",
    "USER.md",
    "memory",
    "",
    "C:/Windows/win.ini",
    "..\\..\\secret.md",
]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "workspace"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n\n- Alice likes durian.\n", encoding="utf-8")
    (ws / "memory" / "2025-03-14.md").write_text("# 2025-03-14\n\n- met Bob\n", encoding="utf-8")
    (tmp_path / "outside.md").write_text("top secret\n", encoding="utf-8")
    return ws


@pytest.fixture
async def tools(workspace: Path, any_store: Store) -> AsyncIterator[MemoryTools]:
    index = MemoryIndex(any_store, workspace, MemoryConfig())
    yield MemoryTools(index, MemoryConfig(), "Asia/Tokyo", clock=lambda: FIXED)


def ctx(workspace: Path, *, direct: bool = True, admin: bool = False) -> ToolContext:
    key = "agent:main:local:direct:alice" if direct else "agent:main:local:group:team"
    return ToolContext(key, "s1", "local:alice", direct, workspace, admin=admin)


def test_normalize_accepts_only_memory_files() -> None:
    assert normalize_memory_path("MEMORY.md") == "MEMORY.md"
    assert normalize_memory_path("./memory/2025-03-14.md") == "memory/2025-03-14.md"
    assert normalize_memory_path("memory/projects/krill.md") == "memory/projects/krill.md"
    for raw in ESCAPES:
        with pytest.raises(MemoryPathError):
            normalize_memory_path(raw)


@pytest.mark.parametrize("path", ESCAPES)
async def test_memory_get_refuses_escapes(tools: MemoryTools, workspace: Path, path: str) -> None:
    with pytest.raises(ToolError) as err:
        await tools.get({"path": path}, ctx(workspace))
    assert "secret" not in str(err.value).replace("secret.md", "")


async def test_memory_get_refuses_symlinks_out_of_the_workspace(
    tools: MemoryTools, workspace: Path, tmp_path: Path
) -> None:
    (workspace / "memory" / "evil.md").symlink_to(tmp_path / "outside.md")
    with pytest.raises(ToolError, match="outside the workspace"):
        await tools.get({"path": "memory/evil.md"}, ctx(workspace))
    # A whole memory folder linked elsewhere is refused just the same, for reads and writes.
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "x.md").write_text("secret\n")
    linked = tmp_path / "ws2"
    linked.mkdir()
    (linked / "memory").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ToolError, match="outside the workspace"):
        await tools.get({"path": "memory/x.md"}, ctx(linked))
    with pytest.raises(ToolError, match="outside the workspace"):
        await tools.append({"text": "hello"}, ctx(linked))
    assert (tmp_path / "elsewhere" / "x.md").read_text() == "secret\n"


async def test_memory_get_reads_a_line_range(tools: MemoryTools, workspace: Path) -> None:
    out = await tools.get(
        {"path": "memory/2025-03-14.md", "from_line": 3, "lines": 1}, ctx(workspace)
    )
    assert out.startswith("memory/2025-03-14.md#L3-L3 (of 3 lines)")
    assert out.endswith("- met Bob")
    past = await tools.get({"path": "MEMORY.md", "from_line": 99}, ctx(workspace))
    assert "nothing at line 99" in past
    with pytest.raises(ToolError, match="does not exist"):
        await tools.get({"path": "memory/2020-01-01.md"}, ctx(workspace))
    with pytest.raises(ToolError, match="whole number"):
        await tools.get({"path": "MEMORY.md", "lines": "many"}, ctx(workspace))


async def test_group_sessions_never_see_memory_md(tools: MemoryTools, workspace: Path) -> None:
    group = ctx(workspace, direct=False)
    with pytest.raises(ToolError, match="not part of this conversation"):
        await tools.get({"path": "MEMORY.md"}, group)
    (workspace / "memory" / "groups" / "local-team").mkdir(parents=True)
    (workspace / "memory" / "groups" / "local-team" / "alias.md").symlink_to(
        workspace / "MEMORY.md"
    )
    with pytest.raises(ToolError, match="not part of this conversation"):
        await tools.get({"path": "memory/groups/local-team/alias.md"}, group)
    with pytest.raises(ToolError, match="admin"):
        await tools.append({"text": "planted fact", "file": "MEMORY.md"}, group)
    with pytest.raises(ToolError, match="admin"):
        await tools.append({"text": "planted", "file": "MEMORY.md"}, ctx(workspace, admin=False))
    assert await tools.search({"query": "durian"}, group) == "No memory matches 'durian'."
    assert "MEMORY.md#L3-L3" in await tools.search({"query": "durian"}, ctx(workspace))


async def test_notes_that_live_elsewhere_are_refused(
    tools: MemoryTools, workspace: Path, tmp_path: Path
) -> None:
    """A hard link is a second name for a file that can be anywhere (MEMORY.md here); a
    symlink may point only inside memory/. Neither is read, written or indexed."""
    (workspace / "memory" / "hard.md").hardlink_to(workspace / "MEMORY.md")
    (workspace / "SOUL.md").write_text("soul secret\n", encoding="utf-8")
    (workspace / "memory" / "soul.md").symlink_to(workspace / "SOUL.md")
    shared = workspace / "memory" / "shared"
    shared.mkdir()
    (shared / "news.md").write_text("- met Bob\n", encoding="utf-8")
    (shared / "ok.md").symlink_to(shared / "news.md")
    for direct in (False, True):
        for name in ("memory/hard.md", "memory/soul.md"):
            with pytest.raises(ToolError, match="hard link"):
                await tools.get({"path": name}, ctx(workspace, direct=direct))
    group_read = await tools.get({"path": "memory/shared/ok.md"}, ctx(workspace, direct=False))
    assert "met Bob" in group_read
    group = ctx(workspace, direct=False)
    assert await tools.search({"query": "durian"}, group) == "No memory matches 'durian'."
    assert await tools.search({"query": "soul secret"}, ctx(workspace)) == (
        "No memory matches 'soul secret'."
    )
    # Appending to a hard-linked daily note would write into the other file.
    (workspace / "memory" / "people" / "local-alice").mkdir(parents=True)
    own_note = workspace / "memory" / "people" / "local-alice" / "2025-03-15.md"
    own_note.hardlink_to(tmp_path / "outside.md")
    with pytest.raises(ToolError, match="hard link"):
        await tools.append({"text": "planted"}, ctx(workspace))
    assert (tmp_path / "outside.md").read_text() == "top secret\n"


async def test_append_writes_a_dated_entry_in_the_configured_zone(
    tools: MemoryTools, workspace: Path
) -> None:
    out = await tools.append({"text": "Alice's flight is JL 44\non Friday"}, ctx(workspace))
    # Alice's own note, dated in Tokyo (not UTC's 14th).
    note = workspace / "memory" / "people" / "local-alice" / "2025-03-15.md"
    assert out == "Appended to memory/people/local-alice/2025-03-15.md#L3-L4."
    assert (
        note.read_text()
        == "# 2025-03-15\n\n- [2025-03-15 08:30] Alice's flight is JL 44\n  on Friday\n"
    )
    await tools.append({"text": "second"}, ctx(workspace))
    assert note.read_text().endswith("on Friday\n- [2025-03-15 08:30] second\n")
    admin = ctx(workspace, admin=True)
    curated = await tools.append({"text": "Alice: vegetarian", "file": "MEMORY.md"}, admin)
    assert curated == "Appended to MEMORY.md#L4-L4."
    assert (workspace / "MEMORY.md").read_text().startswith("# Memory\n\n- Alice likes durian.\n")


async def test_append_refuses_bad_input(tools: MemoryTools, workspace: Path) -> None:
    with pytest.raises(ToolError, match="empty"):
        await tools.append({"text": "  "}, ctx(workspace))
    with pytest.raises(ToolError, match="at most"):
        await tools.append({"text": "x" * 5000}, ctx(workspace))
    with pytest.raises(ToolError, match="file must be"):
        await tools.append({"text": "x", "file": "../USER.md"}, ctx(workspace))


NOTE = "memory/2025-03-14.md"
OWN = writable(OPERATOR)


def test_append_never_overwrites_and_respects_the_cap(workspace: Path) -> None:
    now = dt.datetime(2025, 3, 14, 9, 0, tzinfo=ZoneInfo("UTC"))
    note = workspace / "memory" / "2025-03-14.md"
    note.write_text("# 2025-03-14\n\n- no trailing newline")
    done = append_entry(workspace, NOTE, "added", now=now, max_file_bytes=10_000, writable=OWN)
    assert note.read_text() == "# 2025-03-14\n\n- no trailing newline\n- [2025-03-14 09:00] added\n"
    assert done.start_line == 4
    size = note.stat().st_size
    with pytest.raises(MemoryFull):
        append_entry(workspace, NOTE, "y" * 100, now=now, max_file_bytes=size + 10, writable=OWN)
    assert note.stat().st_size == size


def test_concurrent_appends_never_interleave(workspace: Path) -> None:
    now = dt.datetime(2025, 3, 16, 12, 0, tzinfo=ZoneInfo("UTC"))
    writers, each = 8, 40

    def write(worker: int) -> None:
        for i in range(each):
            text = f"worker {worker} entry {i} " + "z" * 300 + "\ncontinued"
            append_entry(
                workspace, "memory/2025-03-16.md", text, now=now, max_file_bytes=10**7, writable=OWN
            )

    with ThreadPoolExecutor(writers) as pool:
        list(pool.map(write, range(writers)))
    text = (workspace / "memory" / "2025-03-16.md").read_text()
    assert text.startswith("# 2025-03-16\n\n") and text.count("# 2025-03-16") == 1
    entries = re.findall(
        r"- \[2025-03-16 12:00\] worker (\d+) entry (\d+) z{300}\n  continued\n", text
    )
    assert len(entries) == writers * each
    assert len(set(entries)) == writers * each
    assert len(text) == len("# 2025-03-16\n\n") + sum(
        len(format_entry(f"worker {w} entry {i} " + "z" * 300 + "\ncontinued", now))
        for w, i in entries
    )


async def test_tools_register_with_their_schemas(tools: MemoryTools) -> None:
    registry = ToolRegistry()
    tools.register(registry)
    defs = {d["name"]: d for d in registry.definitions()}
    assert set(defs) == {"memory_search", "memory_get", "memory_append"}
    assert defs["memory_append"]["input_schema"]["properties"]["file"]["enum"] == [
        "daily",
        "MEMORY.md",
    ]
    assert defs["memory_get"]["input_schema"]["required"] == ["path"]
