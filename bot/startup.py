"""Start-up problems a person can fix (a missing or unwritable folder, a port in use), turned
into one `StartupError` that names the config key or path and says how to fix it.

`krill run`, `krill chat` and every CLI command that opens the store go through here, so the
same fault gives the same message everywhere, and the CLI prints it without a traceback.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import tempfile
from pathlib import Path

from bot.agent.workspace import bundled_workspace_dir, ensure_workspace, is_template, runtime_files
from bot.config import Config
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

# A missing workspace folder of this name (the default `data/workspace`, or `workspace` as
# `krill init` writes it) is made from the bundled template: any other path that does not
# exist is more likely a typo than a wish for a fresh workspace.
CREATED_WORKSPACE_NAME = "workspace"
# Folders Krill creates for its state, and its database, are readable by this user only:
# they hold every transcript and memory note.
PRIVATE_FOLDER_MODE = 0o700
PRIVATE_FILE_MODE = 0o600


def _where(config: Config) -> str:
    return str(config.source) if config.source else "the defaults (no krill.toml)"


def creates_missing_workspace(config: Config) -> bool:
    """Whether a missing workspace is made from the template rather than taken for a typo."""
    return config.workspace_dir.name == CREATED_WORKSPACE_NAME


def prepare_workspace(config: Config) -> None:
    """Make sure the workspace exists (created from the bundled template when it may be),
    is not the template itself, and say in the log where it is and whether it is writable."""
    path = config.workspace_dir
    if is_template(path):
        raise ConfigError(
            f"workspace.path: {path} is Krill's bundled workspace template, which is never "
            f"used as a live workspace (what the bot writes would end up in the repository, "
            f"the wheel and the image); remove workspace.path from {_where(config)} to use "
            "data/workspace, copied from the template, or point it at another folder"
        )
    if path.is_dir():
        log.info("workspace: %s", path)
        _warn_if_read_only(path)
        return
    if path.exists():
        raise ConfigError(
            f"workspace.path: {path} is a file, not a folder; "
            f"point workspace.path in {_where(config)} at a folder"
        )
    if not creates_missing_workspace(config):
        raise ConfigError(
            f"workspace.path: {path} does not exist; fix workspace.path in {_where(config)}, "
            f"or create that folder (only a missing folder named {CREATED_WORKSPACE_NAME!r} "
            "is created by itself)"
        )
    try:
        # The default workspace is the first thing made in the data folder.
        path.parent.mkdir(parents=True, exist_ok=True, mode=PRIVATE_FOLDER_MODE)
        ensure_workspace(path)
    except OSError as exc:
        raise StartupError(
            f"workspace.path: cannot create {path} ({exc.strerror or exc}); make "
            f"{nearest_existing(path)} writable, or set workspace.path to a writable folder"
        ) from None
    template = bundled_workspace_dir()
    log.info("workspace: created %s from the bundled template %s", path, template)
    if left := runtime_files(template):
        log.warning(
            "the bundled template %s holds %d file(s) an earlier run wrote there (%s); they "
            "were not copied into the new workspace %s: move them there if they are yours",
            template,
            len(left),
            ", ".join(str(p.relative_to(template)) for p in left[:3])
            + (", …" if len(left) > 3 else ""),
            path,
        )


def _warn_if_read_only(path: Path) -> None:
    try:
        probe_folder(path)
    except OSError as exc:
        log.warning(
            "workspace.path: %s is not writable (%s): memory notes, stored tool results and "
            "the console's edits cannot be saved; make it writable by this user, or point "
            "workspace.path at a writable folder",
            path,
            exc.strerror or exc,
        )


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
    path.parent.mkdir(parents=True, exist_ok=True, mode=PRIVATE_FOLDER_MODE)
    probe_folder(path.parent)
    if path.exists():
        with path.open("r+b"):
            pass
    else:
        # SQLite gives its -wal and -shm files the database file's mode.
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE))


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
