"""Start-up problems a person can fix (a missing or unwritable folder, a port in use), turned
into one `StartupError` that names the config key or path and says how to fix it.

`krill run`, `krill chat` and every CLI command that opens the store go through here, so the
same fault gives the same message everywhere, and the CLI prints it without a traceback.
"""

from __future__ import annotations

import logging
import sqlite3
import tempfile
from pathlib import Path

from bot.agent.workspace import ensure_workspace
from bot.config import Config
from bot.config.sections import WorkspaceConfig
from bot.errors import ConfigError, StartupError, StoreUnavailable
from bot.store.base import Store
from bot.store.open_errors import (
    POSTGRES_OPEN_ERRORS,
    encoding_hint,
    postgres_problem,
    sqlite_damaged,
    sqlite_damaged_problem,
)

log = logging.getLogger(__name__)

# Only the default workspace is made from the bundled template when it is missing: any
# other path that does not exist is more likely a typo than a wish for a fresh workspace.
DEFAULT_WORKSPACE = WorkspaceConfig().path


def _where(config: Config) -> str:
    return str(config.source) if config.source else "the defaults (no krill.toml)"


def prepare_workspace(config: Config) -> bool:
    """Make sure the workspace exists; True when it was created from the bundled template."""
    path = config.workspace_dir
    if path.is_dir():
        return False
    if path.exists():
        raise ConfigError(
            f"workspace.path: {path} is a file, not a folder; "
            f"point workspace.path in {_where(config)} at a folder"
        )
    if config.workspace.path != DEFAULT_WORKSPACE:
        raise ConfigError(
            f"workspace.path: {path} does not exist; fix workspace.path in {_where(config)}, "
            "or create that folder (only the default workspace is created by itself)"
        )
    try:
        return ensure_workspace(path)
    except OSError as exc:
        raise StartupError(
            f"workspace.path: cannot create {path} ({exc.strerror or exc}); make "
            f"{nearest_existing(path)} writable, or set workspace.path to a writable folder"
        ) from None


async def open_store(store: Store, config: Config) -> None:
    """Open the store; a folder or file it cannot create or write, a file that is not a
    database, or a server that does not answer or refuses the login, is a `StartupError`."""
    if config.uses_postgres:
        await _open_postgres(store, config)
        return
    path = config.sqlite_path
    try:
        # Checked first: a connection that fails to open leaves aiosqlite's thread behind,
        # which then complains about the closed event loop on the way out.
        _probe_writable(path)
        await store.open()
    except (OSError, sqlite3.Error) as exc:
        await store.close()  # a half-opened connection would outlive the event loop
        if sqlite_damaged(exc):
            raise StartupError(f"storage.url: {sqlite_damaged_problem(path, exc)}") from None
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise StartupError(
            f"storage.url: cannot open the database {path} ({reason}); make "
            f"{nearest_existing(path.parent)} writable by this user, or point storage.url "
            f"in {_where(config)} (or KRILL_STORAGE__URL) at a writable folder"
        ) from None


async def _open_postgres(store: Store, config: Config) -> None:
    url = config.storage.url
    fix = f"fix storage.url in {_where(config)} (or KRILL_STORAGE__URL)"
    try:
        await store.open()
    except StoreUnavailable as exc:  # unreachable for `storage.connect_wait_seconds`
        await store.close()
        raise StartupError(
            f"storage.url: {exc}; start the PostgreSQL server or {fix}{encoding_hint(url)}"
        ) from None
    except POSTGRES_OPEN_ERRORS as exc:  # refused, or not a URL asyncpg can use
        await store.close()
        raise StartupError(f"storage.url: {postgres_problem(exc, url, fix)}") from None


def listen_failed(config: Config, exc: OSError) -> StartupError:
    """The error for a server socket that could not be bound."""
    address = f"{config.server.host}:{config.server.port}"
    return StartupError(
        f"server.port: cannot listen on {address} ({exc.strerror or exc}); stop whatever "
        f"uses that port, or set server.port in {_where(config)} (or KRILL_SERVER__PORT) "
        "to a free one"
    )


def _probe_writable(path: Path) -> None:
    """Raise OSError unless `path`'s folder exists (or can be made) and can take new files
    (SQLite's journal and WAL files live beside the database), and `path` can be written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    probe_folder(path.parent)
    if path.exists():
        with path.open("r+b"):
            pass


def probe_folder(folder: Path) -> None:
    """Raise OSError unless a file can be created in `folder`; leaves nothing behind.
    (Trying is the only test that holds for root and for immutable folders.)"""
    with tempfile.TemporaryFile(dir=folder):
        pass


def nearest_existing(path: Path) -> Path:
    """The folder that has to be writable for `path` to be created."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def warn_of_settings(config: Config, *, model_configured: bool) -> None:
    """Log what about the settings a person should know before the first message: a missing
    key, and every value the config adjusted rather than refused."""
    if not model_configured:
        log.warning(
            "ANTHROPIC_API_KEY is not set: Krill will run, but every reply will ask the "
            "operator to set it (export ANTHROPIC_API_KEY=... or anthropic.api_key in "
            "krill.toml)"
        )
    for adjustment in config.adjustments():
        log.warning("%s", adjustment)
