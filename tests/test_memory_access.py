"""bot.memory.access: the one decision of what a session may read from the workspace, used by
memory_get, send_file and read_tool_result. Each scope (own DM, another person's DM, a
group, shared, the operator's files in a DM and in a group, an admin's DM and an admin in a
group), kept tool results, links and hard links, and paths outside the workspace."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bot.memory.access import readable
from bot.tools.registry import ToolContext, ToolError
from bot.tools.results import result_owner

ALICE_DM = "agent:main:telegram:direct:42"
BOB_DM = "agent:main:telegram:direct:43"
GROUP = "agent:main:telegram:group:-100"
MAIN = "agent:main:main"  # dm_scope = "main": the operator's one DM session
ALICE_NOTE = "memory/people/telegram-42/2026-03-14.md"
FILES = {
    "MEMORY.md": "operator curated",
    "memory/2026-03-14.md": "operator daily",
    "memory/shared/news.md": "shared news",
    ALICE_NOTE: "alice's door code",
    "memory/people/telegram-43/2026-03-14.md": "bob's note",
    "memory/groups/telegram--100/2026-03-14.md": "team note",
    "SOUL.md": "persona",
    "reports/q3.csv": "numbers",
    f"tool-results/2026-03-14/{result_owner(ALICE_DM)}/0123456789ab.txt": "alice's fetch",
    "tool-results/2026-03-14/0123456789ac.txt": "kept before owner folders",
}
NOT_YOURS = "not part of this conversation's memory"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "workspace"
    for name, text in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def ctx(workspace: Path, key: str, *, admin: bool = False) -> ToolContext:
    direct = ":direct:" in key or key == MAIN
    return ToolContext(key, "s1", "telegram:x", direct, workspace, admin=admin)


def reads(workspace: Path, key: str, *, admin: bool = False) -> set[str]:
    """Of FILES, the texts a session in `key` may read."""
    seen = set()
    for name in FILES:
        try:
            seen.add(readable(ctx(workspace, key, admin=admin), name).read_text())
        except ToolError:
            pass
    return seen


EVERYONE = {"shared news", "persona", "numbers"}
OPERATOR = {"operator curated", "operator daily"}


def test_each_scope_reads_what_its_memory_rules_allow(workspace: Path) -> None:
    # Own DM: own notes, shared, the operator's files, own kept results.
    alices = {"alice's door code", "alice's fetch"}
    assert reads(workspace, ALICE_DM) == EVERYONE | OPERATOR | alices
    # Another person's DM: never Alice's note nor her kept result.
    assert reads(workspace, BOB_DM) == EVERYONE | OPERATOR | {"bob's note"}
    # A group: its own notes and shared; no operator's files.
    assert reads(workspace, GROUP) == EVERYONE | {"team note"}
    # The operator's DM session (dm_scope = "main"): the operator's files, nobody's DMs.
    assert reads(workspace, MAIN) == EVERYONE | OPERATOR
    # An admin's DM: everything, old results included; an admin in a group: the group's view.
    assert reads(workspace, BOB_DM, admin=True) == set(FILES.values())
    assert reads(workspace, GROUP, admin=True) == EVERYONE | {"team note"}


def test_refusals_say_why_without_saying_whether_the_file_exists(workspace: Path) -> None:
    for name in (ALICE_NOTE, "memory/people/telegram-42/never-written.md"):
        with pytest.raises(ToolError, match=NOT_YOURS):
            readable(ctx(workspace, BOB_DM), name)
    with pytest.raises(ToolError, match=NOT_YOURS):
        readable(ctx(workspace, GROUP), "MEMORY.md")
    result = f"tool-results/2026-03-14/{result_owner(ALICE_DM)}/0123456789ab.txt"
    with pytest.raises(ToolError, match="tool result kept for another conversation"):
        readable(ctx(workspace, BOB_DM), result)
    with pytest.raises(ToolError, match="does not exist"):
        readable(ctx(workspace, ALICE_DM), "memory/people/telegram-42/never-written.md")


def test_spellings_of_a_path_are_judged_by_what_they_name(workspace: Path) -> None:
    bob = ctx(workspace, BOB_DM)
    for spelling in (
        "./memory/people/telegram-42/2026-03-14.md",
        "reports/../memory/people/telegram-42/2026-03-14.md",
        "memory//people/telegram-42/2026-03-14.md",
        str(workspace / ALICE_NOTE),  # absolute, inside the workspace
        "Memory/People/Telegram-42/2026-03-14.md",  # what a case-insensitive disk would open
        " memory/people/telegram-42/2026-03-14.md ",
    ):
        with pytest.raises(ToolError, match=NOT_YOURS):
            readable(bob, spelling)
    for outside in ("../krill.toml", "/etc/passwd", "memory/../../krill.toml"):
        with pytest.raises(ToolError, match="only files inside the workspace"):
            readable(bob, outside)
    with pytest.raises(ToolError, match="empty"):
        readable(bob, "  ")


def test_links_cannot_carry_a_note_out_of_its_scope(workspace: Path) -> None:
    bob, admin = ctx(workspace, BOB_DM), ctx(workspace, BOB_DM, admin=True)
    (workspace / "door.txt").symlink_to(workspace / ALICE_NOTE)
    (workspace / "people").symlink_to(workspace / "memory" / "people")
    os.link(workspace / ALICE_NOTE, workspace / "copy.txt")
    with pytest.raises(ToolError, match=NOT_YOURS):
        readable(bob, "door.txt")
    with pytest.raises(ToolError, match=NOT_YOURS):
        readable(bob, "people/telegram-42/2026-03-14.md")
    with pytest.raises(ToolError, match="hard link"):
        readable(bob, "copy.txt")
    assert readable(admin, "copy.txt").read_text() == "alice's door code"
    # A link to a file everyone may read is fine.
    (workspace / "latest.csv").symlink_to(workspace / "reports" / "q3.csv")
    assert readable(bob, "latest.csv").read_text() == "numbers"


def test_only_regular_files_are_read(workspace: Path) -> None:
    os.mkfifo(workspace / "pipe")  # reading it would block the turn
    for name in ("pipe", "reports", "memory/shared"):
        with pytest.raises(ToolError, match="not a regular file"):
            readable(ctx(workspace, ALICE_DM), name)
