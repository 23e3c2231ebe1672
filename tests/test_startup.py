"""Start-up problems a person can fix end in one message naming the key or path, exit status
2 and no traceback, in `krill run`, `krill chat` and the other CLI commands (bot/startup.py)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from bot.agent.workspace import ensure_workspace
from tests.fs_faults import read_only
from tests.krill_process import KrillProcess, run_cli, write_config

EXIT_FIXABLE = 2


def assert_fixable(code: int, err: str, *needles: str) -> None:
    assert code == EXIT_FIXABLE, err
    assert "Traceback" not in err and "Event loop is closed" not in err, err
    for needle in needles:
        assert needle in err, err


async def test_port_in_use_names_server_port(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = write_config(tmp_path, {"server": {"port": port}})
        code, _, err = await run_cli(tmp_path, "run", "--config", str(config))
    assert_fixable(code, err, "server.port", f"127.0.0.1:{port}", str(config))
    assert "configuration error" not in err


async def test_unwritable_data_folder_names_storage_url_in_every_command(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    config = str(write_config(tmp_path, {}))
    with read_only(data) as really:
        if not really:
            pytest.skip("cannot make a folder read-only here")
        for args in (["run"], ["chat"], ["status"], ["sessions", "list"], ["memory", "reindex"]):
            code, _, err = await run_cli(tmp_path, *args, "--config", config, stdin=b"hi\n")
            assert_fixable(code, err, "storage.url", str(data / "krill.db"))


async def test_missing_data_folder_under_a_read_only_folder(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    config = str(write_config(tmp_path, {"storage": {"url": "sqlite:///locked/data/krill.db"}}))
    with read_only(locked) as really:
        if not really:
            pytest.skip("cannot make a folder read-only here")
        for command in ("run", "chat"):
            code, _, err = await run_cli(tmp_path, command, "--config", config, stdin=b"hi\n")
            assert_fixable(code, err, "storage.url", f"make {locked} writable")


async def test_a_mistyped_workspace_path_is_an_error_not_a_fresh_workspace(
    tmp_path: Path,
) -> None:
    config = str(write_config(tmp_path, {"workspace": {"path": "worksapce"}}))
    for command in ("run", "chat"):
        code, _, err = await run_cli(tmp_path, command, "--config", config, stdin=b"hi\n")
        assert_fixable(code, err, "workspace.path", str(tmp_path / "worksapce"))
    assert not (tmp_path / "worksapce").exists()


async def test_the_default_workspace_is_still_created(tmp_path: Path) -> None:
    config = str(write_config(tmp_path, {}))
    code, _, err = await run_cli(tmp_path, "chat", "--config", config, stdin=b"")
    assert code == 0, err
    assert (tmp_path / "workspace" / "SOUL.md").is_file()


async def test_init_onto_a_file(tmp_path: Path) -> None:
    target = tmp_path / "krill.toml"
    target.write_text("", encoding="utf-8")
    code, _, err = await run_cli(tmp_path, "init", str(target))
    assert_fixable(code, err, str(target), "is a file")


async def test_init_into_a_read_only_folder(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    with read_only(locked) as really:
        if not really:
            pytest.skip("cannot make a folder read-only here")
        code, _, err = await run_cli(tmp_path, "init", str(locked))
    assert_fixable(code, err, str(locked), "cannot write")


async def test_an_unreachable_platform_at_start_is_not_a_configuration_error(
    tmp_path: Path,
) -> None:
    with socket.socket() as closed:  # bound, never listening: connections are refused
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}"
        config = write_config(
            tmp_path, {"telegram": {"enabled": True, "token": "1:abc", "api_base_url": url}}
        )
        code, _, err = await run_cli(tmp_path, "run", "--config", str(config), timeout=120)
    assert_fixable(code, err, "telegram.api_base_url", url)
    assert "configuration error" not in err


async def test_a_read_only_workspace_is_named_in_a_warning_at_start(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    ensure_workspace(workspace)
    with read_only(workspace, workspace / "memory") as really:
        assert really, "could not make the workspace read-only (needs chattr as root)"
        async with KrillProcess(tmp_path, {}) as krill:
            log = krill.log()
    assert f"workspace.path: {workspace} is not writable" in log
    assert "WARNING" in log.split(f"workspace.path: {workspace}")[0].splitlines()[-1]
