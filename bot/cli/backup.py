"""`krill backup PATH` and `krill restore PATH`: the store, the workspace and the received
media in one archive. With PostgreSQL both refuse and say which PostgreSQL tools to use
instead.

The archive is a gzipped tar holding `krill.db` (a consistent copy made with SQLite's online
backup API while Krill may be running), `workspace/` (memory notes and stored tool results
included) and `media/` (photos and files people sent, which transcripts refer to). It holds
every transcript, so it is written readable by its owner only, and a restored database is
too. Restoring refuses while any Krill process has the store open, and refuses to replace
existing data without `--force`.
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
from bot.media.files import PREPARING
from bot.startup import PRIVATE_FILE_MODE, PRIVATE_FOLDER_MODE
from bot.store.backup import exclusive, restore_database
from bot.store.base import Store

DATABASE = "krill.db"
WORKSPACE = "workspace"
MEDIA = "media"
EXIT_REFUSED = 2


def backup_command(config: Config, args: argparse.Namespace) -> int:
    if config.uses_postgres:
        return _use_postgres_tools("backup", config)
    target = Path(args.path).expanduser().resolve()
    if target.exists() and not args.force:
        print(f"krill backup: {target} already exists (use --force to replace it)", file=sys.stderr)
        return EXIT_REFUSED
    folders = {WORKSPACE: config.workspace_dir, MEDIA: config.media_dir}
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        files = _backup(config, target, folders)
    except OSError as exc:
        raise KrillError(f"cannot write the backup {target}: {exc.strerror}") from None
    size = target.stat().st_size / 1e6
    print(
        f"backed up the store, {files[WORKSPACE]} workspace file(s) and {files[MEDIA]} media "
        f"file(s) to {target} ({size:.1f} MB)"
    )
    return 0


def _backup(config: Config, target: Path, folders: dict[str, Path]) -> dict[str, int]:
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".krill-backup-") as scratch:
        copy = Path(scratch) / DATABASE
        progress = TerminalProgress("copying the store")

        async def run(store: Store) -> int:
            await store.backup(copy, progress)
            return 0

        asyncio.run(with_store(config, run))
        progress.finish()
        partial = Path(scratch) / "backup.tar.gz"
        files = _pack(partial, copy, folders)
        os.replace(partial, target)
    return files


def restore_command(config: Config, args: argparse.Namespace) -> int:
    if config.uses_postgres:
        return _use_postgres_tools("restore", config)
    source = Path(args.path).expanduser().resolve()
    database = config.sqlite_path
    folders = {WORKSPACE: config.workspace_dir, MEDIA: config.media_dir}
    try:
        archive = tarfile.open(source, "r:gz")
    except (OSError, tarfile.TarError) as exc:
        raise KrillError(f"cannot read {source}: {exc}") from None
    database.parent.mkdir(parents=True, exist_ok=True, mode=PRIVATE_FOLDER_MODE)
    with archive, exclusive(database):
        if DATABASE not in archive.getnames():
            raise KrillError(f"{source} is not a Krill backup (no {DATABASE})")
        existing = [str(p) for p in (database, *folders.values()) if _has_data(p)]
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
            database.chmod(PRIVATE_FILE_MODE)
            progress.finish()
            files = {name: _replace(unpacked / name, folder) for name, folder in folders.items()}
    print(
        f"restored the store to {database}, {files[WORKSPACE]} workspace file(s) to "
        f"{folders[WORKSPACE]} and {files[MEDIA]} media file(s) to {folders[MEDIA]}"
    )
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


def _pack(archive: Path, database: Path, folders: dict[str, Path]) -> dict[str, int]:
    """Write the archive, readable by its owner only; the number of files of each folder."""
    found = {
        name: sorted(p for p in folder.rglob("*") if p.is_file() and _kept(name, folder, p))
        if folder.is_dir()
        else []
        for name, folder in folders.items()
    }
    total = sum(len(files) for files in found.values())
    progress = TerminalProgress("packing the workspace and media")
    done = 0
    fd = os.open(archive, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE)
    with os.fdopen(fd, "wb") as raw, tarfile.open(fileobj=raw, mode="w:gz") as tar:
        tar.add(database, DATABASE)
        for name, folder in folders.items():
            if folder.is_dir():
                tar.add(folder, name, recursive=False)
            for path in found[name]:
                tar.add(path, f"{name}/{path.relative_to(folder).as_posix()}")
                done += 1
                progress(done, total)
    progress.finish()
    return {name: len(files) for name, files in found.items()}


def _kept(name: str, folder: Path, path: Path) -> bool:
    """Whether a file belongs in the backup: not a mark of media being prepared right now,
    which after a restore would read as a preparation that killed its process."""
    return name != MEDIA or path.relative_to(folder).parts[0] != PREPARING


def _replace(unpacked: Path, folder: Path) -> int:
    """Put the backup's copy of a folder in place; the old one is removed only once it is.
    A folder the backup does not hold (an older backup's media) is left as it is."""
    if not unpacked.is_dir():
        return 0
    replaced = folder.with_name(folder.name + ".before-restore")
    if folder.exists():
        shutil.rmtree(replaced, ignore_errors=True)
        folder.rename(replaced)
    folder.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(unpacked, folder)
    shutil.rmtree(replaced, ignore_errors=True)
    return sum(1 for p in folder.rglob("*") if p.is_file())


def _has_data(path: Path) -> bool:
    if path.is_dir():
        return any(path.iterdir())
    return path.exists() and path.stat().st_size > 0
