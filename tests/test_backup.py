"""`krill backup` and `krill restore` end to end: an online backup of a running service,
restored into a fresh folder, and the refusals that protect existing data."""

from __future__ import annotations

from pathlib import Path

from tests.fakes.anthropic import FakeAnthropic
from tests.krill_process import KrillProcess, run_cli, write_config
from tests.test_e2e_local import model_env, plain_echo

NOTE = "memory/boat.md"


async def sessions_and_note(directory: Path, config: Path) -> tuple[str, str]:
    code, out, err = await run_cli(
        directory,
        "sessions",
        "show",
        "agent:main:local:direct:bob",
        "--config",
        str(config),
    )
    assert code == 0, err
    return out, (directory / "workspace" / NOTE).read_text()


async def test_backup_while_running_then_restore_elsewhere(
    tmp_path: Path, fake_anthropic: FakeAnthropic
):
    fake_anthropic.default_handler = plain_echo
    home, fresh = tmp_path / "home", tmp_path / "fresh"
    home.mkdir()
    fresh.mkdir()
    archive = tmp_path / "krill-backup.tar.gz"
    async with KrillProcess(home, {}, model_env(fake_anthropic)) as krill:
        await krill.chat("the boat is blue", user="bob")
        (home / "workspace" / NOTE).write_text("- the boat is blue\n")
        cfg = str(krill.config_path)
        code, out, err = await run_cli(home, "backup", str(archive), "--config", cfg)
        assert code == 0, err
        assert str(archive) in out
        code, _, err = await run_cli(home, "backup", str(archive), "--config", cfg)
        assert code == 2 and "--force" in err
        # A running instance's store is never overwritten, not even with --force.
        code, _, err = await run_cli(home, "restore", str(archive), "--force", "--config", cfg)
        assert code == 2 and "stop it first" in err and "Traceback" not in err
        transcript, note = await sessions_and_note(home, krill.config_path)
    assert "the boat is blue" in transcript and "echo: the boat is blue" in transcript

    fresh_config = write_config(fresh, {})
    code, out, err = await run_cli(fresh, "restore", str(archive), "--config", str(fresh_config))
    assert code == 0, err
    assert await sessions_and_note(fresh, fresh_config) == (transcript, note)
    # Restoring over data needs --force.
    (fresh / "workspace" / NOTE).write_text("changed\n")
    code, _, err = await run_cli(fresh, "restore", str(archive), "--config", str(fresh_config))
    assert code == 2 and "--force" in err and "Traceback" not in err
    assert (fresh / "workspace" / NOTE).read_text() == "changed\n"
    code, _, err = await run_cli(
        fresh, "restore", str(archive), "--force", "--config", str(fresh_config)
    )
    assert code == 0, err
    assert await sessions_and_note(fresh, fresh_config) == (transcript, note)


async def test_restore_refuses_what_is_not_a_backup(tmp_path: Path):
    config = write_config(tmp_path, {})
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"not an archive")
    code, _, err = await run_cli(tmp_path, "restore", str(junk), "--config", str(config))
    assert code == 2 and "cannot read" in err and "Traceback" not in err
