"""The console's workspace editor against the real `krill run` (bot/console/workspace_files.py):
a bad path (a NUL byte, a name too long) is a 400 that says why, a link out of the
workspace is listed as not editable instead of breaking the page, a save on a full disk is
refused with the file untouched and the operator's text kept, and what killed saves left
behind is removed at start, except a file a save is still writing."""

from __future__ import annotations

import fcntl
import re
from pathlib import Path

import aiohttp
import pytest

from bot.agent.workspace import ensure_workspace
from bot.console.workspace_files import remove_leftovers
from tests.fs_faults import fill, small_disk
from tests.krill_process import KrillProcess

TOKEN = "console-token-for-the-workspace-01"
BEARER = {"Authorization": f"Bearer {TOKEN}"}
CONFIG = {"admin": {"console_token": TOKEN}}


def refusal_shown(status: int, page: str) -> bool:
    return 400 <= status < 500 and "Traceback" not in page and 'class="notice' in page


async def test_a_bad_editor_path_is_a_400_that_says_why(tmp_path: Path) -> None:
    long_name = "n" * 300 + ".md"
    async with (
        KrillProcess(tmp_path, CONFIG) as krill,
        aiohttp.ClientSession(headers=BEARER) as http,
    ):
        answers = {}
        for label, path in (("nul", "SOUL\x00.md"), ("long", long_name)):
            async with http.get(f"{krill.url}/admin/workspace/edit", params={"path": path}) as r:
                answers[f"open {label}"] = (r.status, await r.text())
            async with http.post(
                f"{krill.url}/admin/workspace/save",
                data={"path": path, "text": "x", "version": ""},
                headers={"Origin": krill.url},
            ) as r:
                answers[f"save {label}"] = (r.status, await r.text())
    for label, (status, page) in answers.items():
        assert refusal_shown(status, page), (label, status, page[:300])
    assert "control characters" in answers["open nul"][1]
    assert "at most 200 bytes" in answers["save long"][1]
    assert not list((tmp_path / "workspace").glob("n" * 50 + "*"))


async def test_a_link_out_of_the_workspace_is_listed_as_not_editable(tmp_path: Path) -> None:
    outside = tmp_path / "outside.md"
    outside.write_text("the operator's private notes\n")
    ensure_workspace(tmp_path / "workspace")
    (tmp_path / "workspace" / "LEAK.md").symlink_to(outside)
    async with (
        KrillProcess(tmp_path, CONFIG) as krill,
        aiohttp.ClientSession(headers=BEARER) as http,
    ):
        async with http.get(f"{krill.url}/admin/workspace") as resp:
            status, page = resp.status, await resp.text()
        async with http.get(f"{krill.url}/admin/workspace/edit", params={"path": "LEAK.md"}) as r:
            opened = r.status
    assert status == 200, page
    assert "LEAK.md" in page and "not editable" in page and "leads outside" in page
    assert 'data-path="LEAK.md"' not in page and 'data-path="SOUL.md"' in page
    assert "private notes" not in page
    assert opened == 400


def version_in(page: str) -> str:
    found = re.search(r'name="version" value="([0-9a-f]*)"', page)
    assert found, page
    return found.group(1)


async def test_a_save_on_a_full_disk_changes_nothing_and_keeps_the_text(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    ensure_workspace(workspace)
    with small_disk(workspace) as mounted:
        if not mounted:
            pytest.skip("cannot mount a small tmpfs here (needs root)")
        soul = workspace / "SOUL.md"
        before = soul.read_bytes()
        text = "A new soul, long enough not to fit anywhere.\n" * 2000
        async with (
            KrillProcess(tmp_path, CONFIG) as krill,
            aiohttp.ClientSession(headers=BEARER) as http,
        ):
            async with http.get(
                f"{krill.url}/admin/workspace/edit", params={"path": "SOUL.md"}
            ) as resp:
                version = version_in(await resp.text())
            fill(workspace)
            async with http.post(
                f"{krill.url}/admin/workspace/save",
                data={"path": "SOUL.md", "text": text, "version": version},
                headers={"Origin": krill.url},
            ) as resp:
                status, page = resp.status, await resp.text()
            left = [p.name for p in workspace.iterdir() if p.name.endswith(".tmp")]
        assert refusal_shown(status, page), (status, page[:300])
        assert "No space left on device" in page and "SOUL.md is unchanged" in page
        assert "A new soul, long enough" in page  # the operator's text comes back
        assert soul.read_bytes() == before
        assert left == []


async def test_what_killed_saves_left_is_removed_at_start(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    ensure_workspace(workspace)
    notes = workspace / "memory" / "people" / "local-ann"
    notes.mkdir(parents=True)
    leftovers = [workspace / ".SOUL.md.k1ll3d.tmp", notes / ".2026-01-02.md.x7y8z9.tmp"]
    for path in leftovers:
        path.write_text("half a save")
    unrelated = workspace / ".editor-swap.tmp"
    unrelated.write_text("not ours")
    soul = (workspace / "SOUL.md").read_text()
    async with KrillProcess(tmp_path, CONFIG) as krill:
        pass
    assert [p for p in leftovers if p.exists()] == []
    assert unrelated.exists() and (workspace / "SOUL.md").read_text() == soul
    assert krill.log().count("left by a save that never finished") == 2


def test_a_save_in_progress_is_not_a_leftover(tmp_path: Path) -> None:
    writing = tmp_path / ".SOUL.md.busy01.tmp"
    dead = tmp_path / ".USER.md.dead01.tmp"
    for path in (writing, dead):
        path.write_text("partial")
    with writing.open("rb") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)  # as a save on another replica holds it
        removed = remove_leftovers(tmp_path)
    assert removed == [dead] and writing.exists()
