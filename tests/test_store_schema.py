"""Schema parity: after migrating, SQLite and PostgreSQL hold the same tables, columns (type
family and nullability), keys and indexes; only what each dialect's full-text search owns
differs. A divergence fails with the lines only one store has."""

from __future__ import annotations

from pathlib import Path

from bot.store.dialects import POSTGRES, SQLITE
from bot.store.postgres import PostgresStore
from bot.store.sqlite import SQLiteStore
from tests.schema import difference, postgres_schema, sqlite_schema


async def test_both_stores_migrate_to_the_same_schema(tmp_path: Path, pg_url: str) -> None:
    path = tmp_path / "krill.db"
    for store in (SQLiteStore(path), PostgresStore(pg_url, busy_wait=5.0, connect_wait=5.0)):
        await store.open()
        await store.close()
    sqlite = sqlite_schema(path, SQLITE.search.owns)
    postgres = await postgres_schema(pg_url, POSTGRES.search.owns)
    assert "sessions: column address text null" in sqlite
    assert not difference(sqlite, postgres), "\n" + difference(sqlite, postgres)
