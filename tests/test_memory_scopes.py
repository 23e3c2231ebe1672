"""Tests for bot.memory.scopes and its enforcement: which scope a session writes into, what
each may see, the index's filter (applied inside the query, before limits), and the memory
tools' refusals."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.config import MemoryConfig
from bot.memory.index import MemoryIndex
from bot.memory.scopes import (
    OPERATOR,
    MemoryScope,
    ScopeKind,
    folder_name,
    scope_of,
    visible_scopes,
    writable,
)
from bot.memory.tools import MemoryTools
from bot.store.base import Store, VisiblePaths
from bot.tools.registry import ToolContext, ToolError
from bot.types import ChatType, SessionOrigin

ALICE_DM = "agent:main:telegram:direct:42"
BOB_DM = "agent:main:telegram:direct:43"
GROUP = "agent:main:telegram:group:-100"
ALICE = MemoryScope(ScopeKind.PERSON, "memory/people/telegram-42")
TEAM = MemoryScope(ScopeKind.GROUP, "memory/groups/telegram--100")
FILES = {
    "MEMORY.md": "operator",
    "memory/2025-03-14.md": "operator",
    "memory/projects/krill.md": "operator",
    "memory/shared/news.md": "shared",
    "memory/people/telegram-42/2025-03-14.md": "alice",
    "memory/people/telegram-43/2025-03-14.md": "bob",
    "memory/groups/telegram--100/2025-03-14.md": "team",
    "memory/groups/telegram--100-7/2025-03-14.md": "topic",
}


def seen(visible: VisiblePaths) -> set[str]:
    return {owner for path, owner in FILES.items() if visible.allows(path)}


def test_scope_of_each_kind_of_session() -> None:
    dm = SessionOrigin("telegram", ChatType.DIRECT, "42", peer_id="42")
    assert scope_of(dm, ALICE_DM) == ALICE
    assert scope_of(None, ALICE_DM) == ALICE  # a row older than origins: the key says it
    assert scope_of(None, "agent:main:direct:telegram:42") == ALICE  # per-peer, unlinked
    assert scope_of(None, "agent:main:direct:alice").folder == "memory/people/alice"  # linked
    assert scope_of(dm, "agent:main:main") == OPERATOR  # dm_scope "main": the operator's
    assert scope_of(None, GROUP) == TEAM
    topic = SessionOrigin("telegram", ChatType.GROUP, "-100", thread_id="7")
    assert scope_of(topic, GROUP + ":topic:7").folder == "memory/groups/telegram--100-7"
    slack = SessionOrigin("slack", ChatType.CHANNEL, "C0ABC", thread_id="1700.01")
    assert scope_of(slack, "agent:main:slack:channel:c0abc:thread:1700.01") == MemoryScope(
        ScopeKind.GROUP, "memory/groups/slack-c0abc-1700.01"
    )
    with pytest.raises(ValueError):
        scope_of(None, "not a key")


def test_folder_names_stay_one_segment_and_distinct() -> None:
    assert folder_name("local", "../../etc") == "local-..%2F..%2Fetc"
    assert folder_name("..") == "%2E."
    assert folder_name("local", "a/b") != folder_name("local", "a_b")
    assert folder_name("slack", "U01ABC") == folder_name("slack", "u01abc")  # as keys do
    local = SessionOrigin("local", ChatType.DIRECT, "x", peer_id="../alice")
    folder = scope_of(local, "agent:main:local:direct:.._alice").folder
    assert folder.startswith("memory/people/") and folder.count("/") == 2


def test_visible_scopes() -> None:
    assert seen(visible_scopes(ALICE, admin=False)) == {"alice", "shared", "operator"}
    assert seen(visible_scopes(TEAM, admin=False)) == {"team", "shared"}
    assert seen(visible_scopes(OPERATOR, admin=False)) == {"operator", "shared"}
    everything = set(FILES.values())
    assert seen(visible_scopes(ALICE, admin=True)) == everything  # an admin's DM
    assert seen(visible_scopes(TEAM, admin=True)) == {"team", "shared"}  # not in groups
    assert seen(writable(ALICE)) == {"alice"}
    assert seen(writable(OPERATOR)) == {"operator"}


# --- enforcement ------------------------------------------------------------------------------


@pytest.fixture
async def tools(tmp_path: Path, any_store: Store) -> AsyncIterator[MemoryTools]:
    workspace = tmp_path / "workspace"
    for path, owner in FILES.items():
        (workspace / path).parent.mkdir(parents=True, exist_ok=True)
        (workspace / path).write_text(f"# notes\n\n- the {owner} pelican fact\n")
    index = MemoryIndex(any_store, workspace, MemoryConfig())
    yield MemoryTools(index, MemoryConfig(), "UTC")


def ctx(tools: MemoryTools, key: str, *, admin: bool = False) -> ToolContext:
    direct = ":direct:" in key
    return ToolContext(key, "s1", "telegram:x", direct, tools.index.workspace, admin=admin)


async def test_search_sees_only_visible_scopes(tools: MemoryTools) -> None:
    async def owners(key: str, admin: bool = False) -> set[str]:
        out = await tools.search(
            {"query": "pelican", "max_results": 20}, ctx(tools, key, admin=admin)
        )
        return {owner for owner in FILES.values() if f"the {owner} pelican" in out}

    assert await owners(ALICE_DM) == {"alice", "shared", "operator"}
    assert await owners(BOB_DM) == {"bob", "shared", "operator"}
    assert await owners(GROUP) == {"team", "shared"}
    assert await owners(BOB_DM, admin=True) == set(FILES.values())


async def test_filter_runs_before_the_limit(tools: MemoryTools) -> None:
    """Many better matches in someone else's notes must not crowd out one's own."""
    workspace = tools.index.workspace
    crowd = workspace / "memory" / "people" / "telegram-43"
    for i in range(30):
        (crowd / f"2025-01-{i + 1:02d}.md").write_text("- pelican pelican pelican\n" * 3)
    out = await tools.search({"query": "pelican", "max_results": 1}, ctx(tools, GROUP))
    assert "pelican" in out and "telegram-43" not in out
    hits = await tools.index.search("pelican", visible_scopes(TEAM, admin=False), max_results=3)
    assert {h.path.split("/")[1] for h in hits} <= {"groups", "shared"}


async def test_get_and_append_refuse_other_scopes(tools: MemoryTools) -> None:
    alice_note = "memory/people/telegram-42/2025-03-14.md"
    for key in (BOB_DM, GROUP):
        with pytest.raises(ToolError, match="not part of this conversation"):
            await tools.get({"path": alice_note}, ctx(tools, key))
    with pytest.raises(ToolError, match="not part of this conversation"):
        await tools.get({"path": "MEMORY.md"}, ctx(tools, GROUP))
    assert "alice pelican" in await tools.get({"path": alice_note}, ctx(tools, ALICE_DM))
    assert "alice pelican" in await tools.get({"path": alice_note}, ctx(tools, BOB_DM, admin=True))
    # Only an admin's DM may append to MEMORY.md; everyone else's daily note is their own.
    for key in (ALICE_DM, GROUP):
        with pytest.raises(ToolError, match="admin"):
            await tools.append({"text": "planted", "file": "MEMORY.md"}, ctx(tools, key))
    with pytest.raises(ToolError, match="admin"):
        await tools.append({"text": "planted", "file": "MEMORY.md"}, ctx(tools, GROUP, admin=True))
    done = await tools.append({"text": "kept"}, ctx(tools, GROUP))
    assert done.startswith("Appended to memory/groups/telegram--100/")
    done = await tools.append({"text": "x", "file": "MEMORY.md"}, ctx(tools, ALICE_DM, admin=True))
    assert done.startswith("Appended to MEMORY.md")
    # A link in one's own folder to another scope's note is refused like the note itself.
    link = tools.index.workspace / "memory" / "groups" / "telegram--100" / "alias.md"
    link.symlink_to(tools.index.workspace / alice_note)
    with pytest.raises(ToolError, match="not part of this conversation"):
        await tools.get({"path": "memory/groups/telegram--100/alias.md"}, ctx(tools, GROUP))
