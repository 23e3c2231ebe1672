"""`krill backup` and `krill restore` end to end: an online backup of a running service,
restored into a fresh folder, the refusals that protect existing data, received photos
coming back with the store, and the archive, data folder and database kept private."""

from __future__ import annotations

import io
import re
import shutil
import stat
from pathlib import Path

import aiohttp
from PIL import Image

from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.telegram import FakeTelegram
from tests.krill_process import KrillProcess, run_cli, write_config
from tests.test_e2e_local import model_env, plain_echo

NOTE = "memory/boat.md"
CONSOLE_TOKEN = "backup-console-token-0123456789"


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


async def test_a_backup_is_private_and_brings_photos_back(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    """A session with a photo and a stored tool result, backed up, the data folder and the
    workspace wiped, restored: the console serves the photo's thumbnail again."""
    fake_anthropic.default_handler = plain_echo
    photo = io.BytesIO()
    Image.new("RGB", (400, 200), (30, 120, 220)).save(photo, "PNG")
    archive = tmp_path / "backups" / "krill.tar.gz"
    result = Path("workspace/tool-results/2026-05-01/0123456789ab.txt")
    async with FakeTelegram() as tg:
        config = {
            "admin": {"console_token": CONSOLE_TOKEN},
            "telegram": {
                "enabled": True,
                "token": tg.token,
                "api_base_url": tg.url,
                "dm_policy": "open",
            },
        }
        async with KrillProcess(tmp_path, config, model_env(fake_anthropic)) as krill:
            tg.push_update(tg.photo_message(801, 801, caption="look", data=photo.getvalue()))
            await tg.wait_for("sendMessage", predicate=lambda p: "look" in p["text"], timeout=15)
            (tmp_path / result).parent.mkdir(parents=True)
            (tmp_path / result).write_text("a large fetched page\n")
            thumb, served = await thumbnail(krill, "agent:main:telegram:direct:801")
            assert served[0] == 200
            cfg = str(krill.config_path)
            code, out, err = await run_cli(tmp_path, "backup", str(archive), "--config", cfg)
            assert code == 0, err
            assert re.search(r"and [1-9]\d* media file\(s\)", out), out
        assert stat.S_IMODE(archive.stat().st_mode) == 0o600  # it holds every transcript
        shutil.rmtree(tmp_path / "data")
        shutil.rmtree(tmp_path / "workspace")
        code, out, err = await run_cli(tmp_path, "restore", str(archive), "--config", cfg)
        assert code == 0, err
        assert stat.S_IMODE((tmp_path / "data").stat().st_mode) == 0o700
        assert stat.S_IMODE((tmp_path / "data" / "krill.db").stat().st_mode) == 0o600
        assert (tmp_path / result).read_text() == "a large fetched page\n"
        async with KrillProcess(tmp_path, config, model_env(fake_anthropic)) as krill:
            again, served_again = await thumbnail(krill, "agent:main:telegram:direct:801")
    assert again == thumb
    assert served_again == served


async def thumbnail(krill: KrillProcess, key: str) -> tuple[str, tuple[int, bytes]]:
    """The session page's first thumbnail address, and what fetching it answers."""
    bearer = {"Authorization": f"Bearer {CONSOLE_TOKEN}"}
    async with aiohttp.ClientSession() as http:
        async with http.get(
            f"{krill.url}/admin/session", params={"key": key}, headers=bearer
        ) as resp:
            page = await resp.text()
        found = re.search(r'<img src="([^"]+)"[^>]*data-testid="media-thumb"', page)
        assert found is not None, page
        async with http.get(f"{krill.url}{found.group(1)}", headers=bearer) as resp:
            return found.group(1), (resp.status, await resp.read())


async def test_the_data_folder_and_database_are_private(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.default_handler = plain_echo
    async with KrillProcess(tmp_path, {}, model_env(fake_anthropic)) as krill:
        await krill.chat("hello")
        data = tmp_path / "data"
        modes = {
            p.name: stat.S_IMODE(p.stat().st_mode)
            for p in (data, *(data / f"krill.db{s}" for s in ("", "-wal", "-shm")))
        }
    assert modes == {"data": 0o700, "krill.db": 0o600, "krill.db-wal": 0o600, "krill.db-shm": 0o600}
