"""Tests for bot.agent.workspace: prompt assembly, caps, hot reload and the bundled template."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bot.agent.workspace import (
    BASE_PROMPT,
    BOOTSTRAP_FILES,
    Workspace,
    bundled_workspace_dir,
    ensure_workspace,
    truncate_file,
)


@pytest.fixture
def ws_dir(tmp_path: Path) -> Path:
    for name in BOOTSTRAP_FILES:
        (tmp_path / name).write_text(f"content of {name}\n", encoding="utf-8")
    return tmp_path


def test_order_and_headings(ws_dir: Path) -> None:
    prompt = Workspace(ws_dir).system_prompt(include_memory=True)
    assert prompt.startswith(BASE_PROMPT + "\n\n# Workspace\n\n")
    positions = [prompt.index(f"## {name}\n\ncontent of {name}") for name in BOOTSTRAP_FILES]
    assert positions == sorted(positions)
    assert BOOTSTRAP_FILES == (
        "AGENTS.md",
        "SOUL.md",
        "IDENTITY.md",
        "USER.md",
        "TOOLS.md",
        "MEMORY.md",
    )


def test_memory_only_when_included(ws_dir: Path) -> None:
    ws = Workspace(ws_dir)
    group = ws.system_prompt(include_memory=False)
    dm = ws.system_prompt(include_memory=True)
    assert "MEMORY.md" not in group.split("# Workspace", 1)[1]
    assert "content of MEMORY.md" not in group
    assert "## MEMORY.md\n\ncontent of MEMORY.md" in dm
    # The two variants are cached separately and do not disturb each other.
    assert ws.system_prompt(include_memory=False) == group


def test_missing_and_empty_files_skipped(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("rules", encoding="utf-8")
    (tmp_path / "SOUL.md").write_text("", encoding="utf-8")
    (tmp_path / "USER.md").write_text("  \n\n", encoding="utf-8")
    prompt = Workspace(tmp_path).system_prompt(include_memory=True)
    assert "## AGENTS.md\n\nrules" in prompt
    for name in ("SOUL.md", "USER.md", "IDENTITY.md", "TOOLS.md", "MEMORY.md"):
        assert f"## {name}" not in prompt


def test_no_files_gives_base_prompt_with_the_conventions(tmp_path: Path) -> None:
    prompt = Workspace(tmp_path / "absent").system_prompt(include_memory=True)
    assert prompt == BASE_PROMPT
    assert "NO_REPLY" in prompt
    assert "<<<UNTRUSTED" in prompt and "END_UNTRUSTED" in prompt


def test_per_file_cap_keeps_head_and_tail(tmp_path: Path) -> None:
    body = "".join(chr(ord("a") + i % 26) for i in range(5000))
    (tmp_path / "SOUL.md").write_text(body, encoding="utf-8")
    prompt = Workspace(tmp_path, file_max_chars=1000).system_prompt(include_memory=False)
    section = prompt.split("## SOUL.md\n\n", 1)[1]
    head, marker, tail = section.split("\n")
    assert head == body[:700]
    assert tail == body[-200:]
    assert (
        marker
        == "[... SOUL.md truncated: showing 900 of 5000 chars; read the file for the rest ...]"
    )


def test_truncate_file_small_cap_keeps_no_tail_when_zero() -> None:
    out = truncate_file("X.md", "abcdefghij", 4)
    head, _marker, tail = out.split("\n")
    assert head == "ab"
    assert tail == ""  # int(4 * 0.2) == 0 must not mean "the whole text"


def test_total_budget_truncates_then_skips(tmp_path: Path) -> None:
    for name in BOOTSTRAP_FILES:
        (tmp_path / name).write_text(name[0] * 400, encoding="utf-8")
    ws = Workspace(tmp_path, file_max_chars=1000, total_max_chars=1000)
    prompt = ws.system_prompt(include_memory=True)
    # AGENTS and SOUL fit whole (800); IDENTITY gets the remaining 200; 0 left afterwards.
    assert "A" * 400 in prompt and "S" * 400 in prompt
    identity = prompt.split("## IDENTITY.md\n\n", 1)[1]
    assert identity.startswith("I" * 140 + "\n[... IDENTITY.md truncated: showing 180 of 400")
    assert identity.endswith("\n" + "I" * 40)
    for name in ("USER.md", "TOOLS.md", "MEMORY.md"):
        assert f"## {name}" not in prompt


def test_budget_below_minimum_skips_rest(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("a" * 950, encoding="utf-8")
    (tmp_path / "SOUL.md").write_text("soul", encoding="utf-8")
    prompt = Workspace(tmp_path, total_max_chars=1000).system_prompt(include_memory=False)
    assert "## AGENTS.md" in prompt
    assert "## SOUL.md" not in prompt  # 50 chars left is under the 64-char floor


def test_repeated_output_is_identical(ws_dir: Path) -> None:
    first = Workspace(ws_dir).system_prompt(include_memory=True)
    ws = Workspace(ws_dir)
    assert ws.system_prompt(include_memory=True) == first
    assert ws.system_prompt(include_memory=True) is ws.system_prompt(include_memory=True)


def test_edit_is_visible_on_next_call(ws_dir: Path) -> None:
    ws = Workspace(ws_dir)
    before = ws.system_prompt(include_memory=False)
    path = ws_dir / "SOUL.md"
    st = path.stat()
    path.write_text("a brand new soul\n", encoding="utf-8")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    after = ws.system_prompt(include_memory=False)
    assert after != before
    assert "## SOUL.md\n\na brand new soul" in after
    assert "content of SOUL.md" not in after


def test_new_and_deleted_files_are_noticed(tmp_path: Path) -> None:
    ws = Workspace(tmp_path)
    assert "## TOOLS.md" not in ws.system_prompt(include_memory=False)
    (tmp_path / "TOOLS.md").write_text("tool notes", encoding="utf-8")
    assert "## TOOLS.md\n\ntool notes" in ws.system_prompt(include_memory=False)
    (tmp_path / "TOOLS.md").unlink()
    assert "## TOOLS.md" not in ws.system_prompt(include_memory=False)


def test_read_text(ws_dir: Path) -> None:
    ws = Workspace(ws_dir)
    (ws_dir / "HEARTBEAT.md").write_text("- check mail\n", encoding="utf-8")
    assert ws.read_text("HEARTBEAT.md") == "- check mail\n"
    assert ws.read_text("nope.md") is None
    with pytest.raises(ValueError):
        ws.read_text("../secret")


def test_bundled_template_is_complete() -> None:
    root = bundled_workspace_dir()
    for name in (*BOOTSTRAP_FILES, "HEARTBEAT.md", "memory/.gitkeep"):
        assert (root / name).is_file(), name
    assert "## Red Lines" in (root / "AGENTS.md").read_text(encoding="utf-8")
    # The heartbeat checklist ships as a comment only, i.e. with nothing to do.
    heartbeat = (root / "HEARTBEAT.md").read_text(encoding="utf-8").strip()
    assert heartbeat.startswith("<!--") and heartbeat.endswith("-->")
    assert heartbeat.count("-->") == 1


def test_bundled_template_fits_caps() -> None:
    root = bundled_workspace_dir()
    prompt = Workspace(root).system_prompt(include_memory=True)
    assert "truncated:" not in prompt
    assert "🦐" in prompt


def test_ensure_workspace_copies_template(tmp_path: Path) -> None:
    target = tmp_path / "deep" / "workspace"
    assert ensure_workspace(target) is True
    for name in (*BOOTSTRAP_FILES, "HEARTBEAT.md"):
        assert (target / name).read_bytes() == (bundled_workspace_dir() / name).read_bytes()
    assert (target / "memory").is_dir()
    (target / "SOUL.md").write_text("mine", encoding="utf-8")
    assert ensure_workspace(target) is False
    assert (target / "SOUL.md").read_text(encoding="utf-8") == "mine"
