"""A store that will not open ends `krill run` and every other command with one line naming
`storage.url`, the password masked however it was written, and exit status 2, never a
traceback (bot/store/open_errors.py): a refused password (in the user info or as
`?password=`), a port that is no port, a password with unencoded `@#/`, and a SQLite file
that is not a database, which is reported as that, with how to restore a backup."""

from __future__ import annotations

import tarfile
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import quote

import asyncpg
import pytest

from bot.store.open_errors import masked_url
from tests.krill_process import run_cli, write_config
from tests.postgres import PASSWORD_ROLE, PostgresCluster

EXIT_FIXABLE = 2
RIGHT = "Right#pa/ss@1"
WRONG = "Wr@ng#pa/ss"  # as a person might type it into the URL, unencoded
COMMANDS = (["run"], ["status"], ["sessions", "list"])


@pytest.fixture
async def password_db(pg_cluster: PostgresCluster, pg_url: str) -> AsyncIterator[str]:
    """host:port/database of a fresh database that PASSWORD_ROLE (password RIGHT) owns."""
    db = await asyncpg.connect(pg_url)
    try:
        exists = await db.fetchval("SELECT 1 FROM pg_roles WHERE rolname = $1", PASSWORD_ROLE)
        if not exists:
            await db.execute(f"CREATE ROLE {PASSWORD_ROLE} LOGIN")
        await db.execute(f"ALTER ROLE {PASSWORD_ROLE} PASSWORD '{RIGHT}'")
        name = pg_url.rsplit("/", 1)[1]
        await db.execute(f"ALTER DATABASE {name} OWNER TO {PASSWORD_ROLE}")
    finally:
        await db.close()
    yield pg_url.split("@", 1)[1]


async def refused_everywhere(directory: Path, url: str, *needles: str) -> list[str]:
    """Each command's last stderr line, after checking it is one clean refusal."""
    storage = {"url": url, "connect_wait_seconds": 1}
    config = str(write_config(directory, {"storage": storage}))
    lines = []
    for command in COMMANDS:
        code, out, err = await run_cli(directory, *command, "--config", config)
        assert code == EXIT_FIXABLE, (command, err)
        assert "Traceback" not in err, err
        last = err.strip().splitlines()[-1]
        assert last.startswith("krill: storage.url: "), err
        for needle in needles:
            assert needle in last, last
        lines.append(last)
        for secret in (RIGHT, WRONG, quote(RIGHT, safe=""), "pa/ss", "ng#pa", "topsecret"):
            assert secret not in out + err, (secret, err)
    return lines


async def test_a_refused_password_is_one_line_with_the_password_masked(
    tmp_path: Path, password_db: str
) -> None:
    url = f"postgresql://{PASSWORD_ROLE}:{quote(WRONG, safe='')}@{password_db}"
    await refused_everywhere(
        tmp_path, url, f"{PASSWORD_ROLE}:***@{password_db}", "refused the password"
    )


async def test_a_password_in_the_query_is_masked_too(tmp_path: Path, password_db: str) -> None:
    url = f"postgresql://{PASSWORD_ROLE}@{password_db}?password=topsecret"
    await refused_everywhere(tmp_path, url, "?password=***", "refused the password")


async def test_the_right_password_written_encoded_gets_in(tmp_path: Path, password_db: str) -> None:
    url = f"postgresql://{PASSWORD_ROLE}:{quote(RIGHT, safe='')}@{password_db}"
    config = write_config(tmp_path, {"storage": {"url": url}})
    code, out, err = await run_cli(tmp_path, "status", "--config", str(config))
    assert code == 0, err
    assert f"{PASSWORD_ROLE}:***@" in out and quote(RIGHT, safe="") not in out


async def test_an_unencoded_password_is_masked_up_to_the_host(
    tmp_path: Path, password_db: str
) -> None:
    url = f"postgresql://{PASSWORD_ROLE}:{WRONG}@{password_db}"
    lines = await refused_everywhere(
        tmp_path, url, f"{PASSWORD_ROLE}:***@{password_db}", "percent-encoded"
    )
    assert all(WRONG not in line for line in lines)


@pytest.mark.parametrize("port", ["99999", "fivefour"])
async def test_a_port_that_is_no_port_is_one_line(tmp_path: Path, port: str) -> None:
    url = f"postgresql://krill:{quote(WRONG, safe='')}@127.0.0.1:{port}/krill"
    await refused_everywhere(tmp_path, url, f"krill:***@127.0.0.1:{port}/krill", "1 to 65535")


def test_masking_covers_every_way_a_password_is_written() -> None:
    assert masked_url("postgresql://krill:s3cret@db:5432/krill") == (
        "postgresql://krill:***@db:5432/krill"
    )
    assert masked_url("postgresql://krill:p@s#s/w@db:5432/krill") == (
        "postgresql://krill:***@db:5432/krill"
    )
    assert masked_url("postgresql://krill@db/krill?sslmode=require&password=x&a=1") == (
        "postgresql://krill@db/krill?sslmode=require&password=***&a=1"
    )
    assert masked_url("postgresql://krill@db/krill") == "postgresql://krill@db/krill"


def corrupt(database: Path) -> None:
    database.parent.mkdir(parents=True, exist_ok=True)
    database.write_bytes(b"this was a database until something wrote over it\n" * 200)


async def test_a_file_that_is_not_a_database_says_so_and_how_to_restore(tmp_path: Path) -> None:
    config = str(write_config(tmp_path, {}))
    database = tmp_path / "data" / "krill.db"
    backup = tmp_path / "before.tar.gz"
    code, _, err = await run_cli(tmp_path, "status", "--config", config)  # creates the store
    assert code == 0, err
    code, _, err = await run_cli(tmp_path, "backup", str(backup), "--config", config)
    assert code == 0 and tarfile.is_tarfile(backup), err
    corrupt(database)

    for command in (["run"], ["status"], ["chat"]):
        code, _, err = await run_cli(tmp_path, *command, "--config", config, stdin=b"hi\n")
        assert code == EXIT_FIXABLE, err
        assert "Traceback" not in err, err
        last = err.strip().splitlines()[-1]
        assert f"{database} is not a SQLite database" in last, last
        assert "krill restore PATH --force" in last and "writable" not in last, last
    code, out, _ = await run_cli(tmp_path, "doctor", "--config", config)
    assert code == 1 and f"[FAIL] store: {database} is not a SQLite database" in out, out

    # The advice works: the backup goes back over the damaged file.
    code, _, err = await run_cli(tmp_path, "restore", str(backup), "--force", "--config", config)
    assert code == 0, err
    code, _, err = await run_cli(tmp_path, "status", "--config", config)
    assert code == 0, err
