"""`krill status` shows how big the data folder is by kind, so an operator sees what fills
the disk: the database, received media, kept tool results and the rest of the workspace."""

from __future__ import annotations

import json
from pathlib import Path

from tests.krill_process import run_cli, write_config


async def test_status_shows_the_data_folders_size_by_kind(tmp_path: Path) -> None:
    config = str(write_config(tmp_path, {"workspace": {"path": "ws"}}))
    media = tmp_path / "data" / "media" / "ab"
    media.mkdir(parents=True)
    (media / "ab12").write_bytes(b"p" * 2_000)
    kept = tmp_path / "ws" / "tool-results" / "2026-11-27" / "agent-main"
    kept.mkdir(parents=True)
    (kept / "r1.txt").write_bytes(b"r" * 3_000)
    (tmp_path / "ws" / "MEMORY.md").write_bytes(b"m" * 500)

    code, out, err = await run_cli(tmp_path, "status", "--json", "--config", config)
    assert code == 0, err
    disk = json.loads(out)["disk"]
    assert disk["media"] == 2_000
    assert disk["tool_results"] == 3_000
    assert disk["workspace"] == 500  # the kept results are counted once, as their own kind
    database = tmp_path / "data" / "krill.db"
    assert disk["database"] >= database.stat().st_size > 0

    code, out, err = await run_cli(tmp_path, "status", "--config", config)
    assert code == 0, err
    (line,) = [line for line in out.splitlines() if line.startswith("data: ")]
    assert "media 2 kB" in line and "tool results 3 kB" in line
    assert "workspace 500 bytes" in line and "database " in line
