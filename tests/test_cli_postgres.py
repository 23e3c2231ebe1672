"""The command line on a PostgreSQL store: the same commands read the same rows, doctor
checks the server and its schema instead of a file, backup and restore point at the
PostgreSQL tools, and the password never appears in what a command prints."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import asyncpg
import pytest

from bot.config import load_config
from bot.store.base import Pairing, PairingStatus
from bot.store.factory import store_location
from bot.store.migrations import LATEST
from bot.store.postgres import PostgresStore
from bot.types import Address, ChatType, SessionOrigin, Usage
from channels.registry import CHANNELS
from tests import entries
from tests.krill_process import run_cli, write_config
from tests.postgres import free_port
from tests.replica_storage import STORES, storage_url

KEY = "agent:main:telegram:direct:42"
ORIGIN = SessionOrigin("telegram", ChatType.DIRECT, "42", peer_id="42")
PASSWORD = "s3cret"  # the test server trusts loopback, so any password gets in
EXIT_REFUSED = 2


def with_password(url: str) -> str:
    return url.replace("postgresql://krill@", f"postgresql://krill:{PASSWORD}@")


async def krill(
    directory: Path, url: str, *args: str, connect_wait: float = 30
) -> tuple[int, str, str]:
    storage = {"url": url, "connect_wait_seconds": connect_wait}
    config = write_config(directory, {"storage": storage})
    code, out, err = await run_cli(directory, *args, "--config", str(config))
    assert "Traceback" not in out + err, err
    assert PASSWORD not in out + err
    return code, out, err


@asynccontextmanager
async def opened(url: str) -> AsyncIterator[PostgresStore]:
    """The store as a replica has it, to write what the commands then read."""
    store = PostgresStore(url)
    await store.open()
    try:
        yield store
    finally:
        await store.close()


def store_line(out: str) -> str:
    return next(line for line in out.splitlines() if line.split(":")[0].endswith("store"))


async def test_sessions_reminders_and_pairings_read_the_shared_database(
    tmp_path: Path, pg_url: str
) -> None:
    async with opened(pg_url) as store:
        session = await store.get_or_create_session(KEY, ORIGIN)
        await store.append_entries([entries.person("hello from a replica", session.session_id)])
        await store.add_usage(
            session.session_id, Usage(1200, 34), context_tokens=1234, cost_usd=0.5, at=None
        )
        await store.reminder_add(
            session_key=KEY, address=Address("telegram", "42"),
            creator="telegram:42", due_at=time.time() + 3600, text="water the plants",
            created_at=time.time(),
        )  # fmt: skip
        await store.pairing_put(
            Pairing("telegram", "77", "ABCD2345", PairingStatus.PENDING, time.time(), "Bo")
        )
    url = with_password(pg_url)

    code, out, _ = await krill(tmp_path, url, "sessions", "list")
    assert code == 0 and f"{KEY}  {session.session_id}  turns=0" in out
    code, out, _ = await krill(tmp_path, url, "sessions", "show", KEY)
    assert code == 0 and "hello from a replica" in out and '"input_tokens": 1200' in out
    code, out, _ = await krill(tmp_path, url, "reminders", "list")
    assert code == 0 and "water the plants" in out
    code, out, _ = await krill(tmp_path, url, "pairing", "approve", "telegram", "ABCD2345")
    assert code == 0 and "approved telegram:77 Bo" in out
    code, out, _ = await krill(tmp_path, url, "pairing", "list")
    assert "no pending pairing requests" in out


@pytest.fixture(params=STORES)
def any_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """`storage.url` of each store `krill status` can read whole (PostgreSQL joins STORES once
    its inbound and outbox tables are merged), with a password where it takes one."""
    return with_password(storage_url(request, tmp_path))


async def test_status_names_the_database_with_its_password_masked(
    tmp_path: Path, any_url: str
) -> None:
    code, out, _ = await krill(tmp_path, any_url, "status", "--json")
    assert code == 0
    status = json.loads(out)
    shown = any_url.replace(f":{PASSWORD}@", ":***@").removeprefix("sqlite:///")
    assert (status["database"], status["sessions"]) == (shown, [])


def test_the_database_is_named_without_its_password(tmp_path: Path) -> None:
    url = f"postgresql://krill:{PASSWORD}@db.internal:5432/krill"
    config = load_config(
        str(write_config(tmp_path, {"storage": {"url": url}})), env={}, channels=CHANNELS
    )
    assert store_location(config) == "postgresql://krill:***@db.internal:5432/krill"


async def test_doctor_checks_the_server_and_schema_without_creating_it(
    tmp_path: Path, pg_url: str
) -> None:
    url = with_password(pg_url)
    _, out, _ = await krill(tmp_path, url, "doctor")
    assert store_line(out).startswith("[ok]"), out
    assert "is empty; `krill run` will create the schema" in store_line(out)
    assert "krill:***@" in store_line(out)
    db = await asyncpg.connect(pg_url)
    try:  # doctor only looked
        assert await db.fetchval("SELECT to_regclass('schema_version')") is None
    finally:
        await db.close()

    async with opened(pg_url):  # migrates
        pass
    _, out, _ = await krill(tmp_path, url, "doctor")
    assert store_line(out).startswith("[ok]"), out
    assert f"(schema v{LATEST}, PostgreSQL " in store_line(out)


async def test_doctor_fails_on_a_server_that_does_not_answer(tmp_path: Path) -> None:
    url = f"postgresql://krill:{PASSWORD}@127.0.0.1:{free_port()}/krill"
    code, out, _ = await krill(tmp_path, url, "doctor")
    assert code == 1
    line = store_line(out)
    assert line.startswith("[FAIL]") and "krill:***@127.0.0.1" in line, line
    assert f"storage.url in {tmp_path / 'krill.toml'}" in line, line


async def test_a_command_on_a_server_that_does_not_answer_says_what_to_fix(
    tmp_path: Path,
) -> None:
    url = f"postgresql://krill:{PASSWORD}@127.0.0.1:{free_port()}/krill"
    code, _, err = await krill(tmp_path, url, "sessions", "list", connect_wait=1)
    assert code == EXIT_REFUSED
    assert "storage.url" in err and "krill:***@127.0.0.1" in err, err


async def test_backup_and_restore_point_at_the_postgresql_tools(
    tmp_path: Path, pg_url: str
) -> None:
    url = with_password(pg_url)
    target = tmp_path / "backup.tar.gz"
    code, _, err = await krill(tmp_path, url, "backup", str(target))
    assert code == EXIT_REFUSED and "pg_dump" in err and "krill:***@" in err, err
    assert not target.exists()
    target.write_bytes(b"not used")
    code, _, err = await krill(tmp_path, url, "restore", str(target))
    assert code == EXIT_REFUSED and "pg_restore" in err, err
