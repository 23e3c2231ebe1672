"""The PostgreSQL store's own mechanics, against a real throwaway server: migrations once
across replicas starting together, a dropped connection, a server that is not there."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import asyncpg
import pytest

from bot.store.migrations import LATEST, MIGRATIONS
from bot.store.postgres import PostgresStore
from bot.store.schema import BASE_VERSION
from channels.registry import CHANNELS
from tests.krill_process import run_cli, write_config
from tests.postgres import free_port

EXIT_FIXABLE = 2


async def test_replicas_starting_together_migrate_once(pg_url: str) -> None:
    stores = [PostgresStore(pg_url) for _ in range(3)]
    await asyncio.gather(*(s.open() for s in stores))
    try:
        assert [await s.schema_version() for s in stores] == [LATEST] * 3
        rows = await stores[0].db.fetch("SELECT version FROM schema_version")
        assert sorted(r[0] for r in rows) == [BASE_VERSION, *(m.version for m in MIGRATIONS)]
        assert await stores[1].integrity_check() == "ok"
    finally:
        await asyncio.gather(*(s.close() for s in stores))


async def test_a_dropped_connection_is_replaced(pg_store: PostgresStore, pg_url: str) -> None:
    assert await pg_store.db.fetchval("SELECT 1") == 1
    admin = await asyncpg.connect(pg_url)
    try:
        killed = await admin.fetchval(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
    finally:
        await admin.close()
    assert killed >= 1
    assert await pg_store.db.fetchval("SELECT 2") == 2


async def test_an_unreachable_server_at_start_up_is_one_clear_message(tmp_path: Path) -> None:
    url = f"postgresql://krill:s3cret@127.0.0.1:{free_port()}/krill"
    config = write_config(tmp_path, {"storage": {"url": url, "connect_wait_seconds": 2}})
    started = time.monotonic()
    code, _, err = await run_cli(tmp_path, "run", "--config", str(config))
    assert code == EXIT_FIXABLE, err
    assert "Traceback" not in err, err
    assert "storage.url" in err and "127.0.0.1" in err, err
    assert "s3cret" not in err and "***" in err, err
    # It kept trying for the configured wait, not less.
    assert time.monotonic() - started >= 2


def test_an_unknown_storage_scheme_is_a_config_error(tmp_path: Path) -> None:
    from bot.config import load_config
    from bot.errors import ConfigError

    path = write_config(tmp_path, {"storage": {"url": "mysql://u:pw@h/db"}})
    with pytest.raises(ConfigError) as caught:
        load_config(str(path), env={}, channels=CHANNELS)
    assert "storage.url" in str(caught.value) and "pw" not in str(caught.value)
