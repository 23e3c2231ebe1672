"""`krill backup PATH` and `krill restore PATH`: the store and the workspace in one archive.
With PostgreSQL both refuse and say which PostgreSQL tools to use instead.

The archive is a gzipped tar holding `krill.db` (a consistent copy made with SQLite's online
backup API while Krill may be running) and `workspace/`. Restoring refuses while any Krill
process has the store open, and refuses to replace existing data without `--force`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

from bot.cli.progress import TerminalProgress
from bot.cli.store_access import with_store
from bot.config import Config
from bot.errors import KrillError
from bot.store.backup import exclusive, restore_database
from bot.store.base import Store

DATABASE = "krill.db"
WORKSPACE = "workspace"
EXIT_REFUSED = 2


def backup_command(config: Config, args: argparse.Namespace) -> int:
    if config.uses_postgres:
        return _use_postgres_tools("backup", config)
    target = Path(args.path).expanduser().resolve()
    if target.exists() and not args.force:
        print(f"krill backup: {target} already exists (use --force to replace it)", file=sys.stderr)
        return EXIT_REFUSED
    workspace = config.workspace_dir
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        files = _backup(config, target, workspace)
    except OSError as exc:
        raise KrillError(f"cannot write the backup {target}: {exc.strerror}") from None
    size = target.stat().st_size / 1e6
    print(f"backed up the store and {files} workspace file(s) to {target} ({size:.1f} MB)")
    return 0


def _backup(config: Config, target: Path, workspace: Path) -> int:
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".krill-backup-") as scratch:
        copy = Path(scratch) / DATABASE
        progress = TerminalProgress("copying the store")

        async def run(store: Store) -> int:
            await store.backup(copy, progress)
            return 0

        asyncio.run(with_store(config, run))
        progress.finish()
        partial = Path(scratch) / "backup.tar.gz"
        files = _pack(partial, copy, workspace)
        os.replace(partial, target)
    return files


def restore_command(config: Config, args: argparse.Namespace) -> int:
    if config.uses_postgres:
        return _use_postgres_tools("restore", config)
    source = Path(args.path).expanduser().resolve()
    database = config.sqlite_path
    workspace = config.workspace_dir
    try:
        archive = tarfile.open(source, "r:gz")
    except (OSError, tarfile.TarError) as exc:
        raise KrillError(f"cannot read {source}: {exc}") from None
    with archive, exclusive(database):
        if DATABASE not in archive.getnames():
            raise KrillError(f"{source} is not a Krill backup (no {DATABASE})")
        existing = [str(p) for p in (database, workspace) if _has_data(p)]
        if existing and not args.force:
            print(
                f"krill restore: {' and '.join(existing)} already hold data; "
                "use --force to replace them with the backup",
                file=sys.stderr,
            )
            return EXIT_REFUSED
        with tempfile.TemporaryDirectory(dir=database.parent, prefix=".krill-restore-") as tmp:
            unpacked = Path(tmp)
            archive.extractall(unpacked, filter="data")
            progress = TerminalProgress("restoring the store")
            restore_database(unpacked / DATABASE, database, progress)
            progress.finish()
            files = _replace_workspace(unpacked / WORKSPACE, workspace)
    print(f"restored the store to {database} and {files} workspace file(s) to {workspace}")
    return 0


def _use_postgres_tools(command: str, config: Config) -> int:
    """The archive holds a SQLite file; a PostgreSQL database has its own tools, which also
    work while every replica keeps running."""
    from bot.store.open_errors import masked_url

    print(
        f"krill {command}: the store is the PostgreSQL database {masked_url(config.storage.url)};"
        " back it up with `pg_dump --format=custom --file=krill.dump URL` and restore it with"
        " `pg_restore --clean --dbname=URL krill.dump` (stop every replica first), and copy"
        f" the workspace ({config.workspace_dir}) and media ({config.media_dir}) folders"
        " with any file backup",
        file=sys.stderr,
    )
    return EXIT_REFUSED


def _pack(archive: Path, database: Path, workspace: Path) -> int:
    files = sorted(p for p in workspace.rglob("*") if p.is_file()) if workspace.is_dir() else []
    progress = TerminalProgress("packing the workspace")
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(database, DATABASE)
        if workspace.is_dir():
            tar.add(workspace, WORKSPACE, recursive=False)
        for done, path in enumerate(files, 1):
            tar.add(path, f"{WORKSPACE}/{path.relative_to(workspace).as_posix()}")
            progress(done, len(files))
    progress.finish()
    return len(files)


def _replace_workspace(unpacked: Path, workspace: Path) -> int:
    """Put the backup's workspace in place; the old one is removed only once it is."""
    if not unpacked.is_dir():
        return 0
    replaced = workspace.with_name(workspace.name + ".before-restore")
    if workspace.exists():
        shutil.rmtree(replaced, ignore_errors=True)
        workspace.rename(replaced)
    workspace.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(unpacked, workspace)
    shutil.rmtree(replaced, ignore_errors=True)
    return sum(1 for p in workspace.rglob("*") if p.is_file())


def _has_data(path: Path) -> bool:
    if path.is_dir():
        return any(path.iterdir())
    return path.exists() and path.stat().st_size > 0
