"""The store several in-process replicas (`App`s) share in a test: the one SQLite file their
common data folder holds, or one PostgreSQL database of the throwaway test cluster."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.store.base import Store
from bot.store.postgres import PostgresStore
from bot.store.sqlite import SQLiteStore

STORES = ["sqlite", "postgres"]


def storage_lines(request: pytest.FixtureRequest) -> str:
    """The `[storage]` lines for `request.param` (one of STORES); none for SQLite."""
    if request.param == "postgres":
        return f'url = "{request.getfixturevalue("pg_url")}"\n'
    return ""


def storage_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """`storage.url` for `request.param` (one of STORES): a SQLite file under `tmp_path`
    that several processes can share, or a fresh PostgreSQL database."""
    if request.param == "postgres":
        return str(request.getfixturevalue("pg_url"))
    return f"sqlite:///{tmp_path / 'shared' / 'krill.db'}"


@contextlib.asynccontextmanager
async def opened_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """An opened store of the kind `request.param` (one of STORES) names."""
    store: Store
    if request.param == "postgres":
        url = request.getfixturevalue("pg_url")
        store = PostgresStore(url, busy_wait=5.0, connect_wait=5.0)
    else:
        store = SQLiteStore(tmp_path / "krill.db")
    await store.open()
    try:
        yield store
    finally:
        await store.close()
