"""Disk faults for tests and benchmarks: a folder that is really read-only, even when
running as root, and a folder on a small disk that can be filled up.

`chmod` is enough for ordinary users; root ignores it, so the immutable attribute
(`chattr +i`) is used as well where the filesystem supports it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

READ_ONLY_DIR = 0o555


def _writable(folder: Path) -> bool:
    probe = folder / f".probe-{uuid.uuid4().hex}"
    try:
        probe.write_text("x")
    except OSError:
        return False
    probe.unlink()
    return True


def _chattr(flag: str, paths: list[Path]) -> bool:
    if shutil.which("chattr") is None:
        return False
    result = subprocess.run(
        ["chattr", flag, *map(str, paths)], capture_output=True, check=False, timeout=10
    )
    return result.returncode == 0


@contextlib.contextmanager
def read_only(*folders: Path) -> Iterator[bool]:
    """Make `folders` and the files in them unwritable; yields whether that worked.

    Everything is restored on exit, so temporary folders can still be deleted.
    """
    paths = [p for folder in folders for p in (folder, *folder.iterdir())]
    modes = {p: p.stat().st_mode for p in paths}
    for path in paths:
        os.chmod(path, READ_ONLY_DIR if path.is_dir() else 0o444)
    immutable = not _writable(folders[0]) or _chattr("+i", paths)
    try:
        yield immutable and not any(_writable(f) for f in folders)
    finally:
        _chattr("-i", paths)
        for path, mode in modes.items():
            os.chmod(path, mode)


@contextlib.contextmanager
def small_disk(folder: Path, size: str = "1m") -> Iterator[bool]:
    """Mount a `size` tmpfs over `folder` with copies of its files, so a test can fill it
    up (ENOSPC); yields whether that worked (mounting needs root). Unmounted on exit, and
    the files written meanwhile are gone with it."""
    saved = Path(tempfile.mkdtemp(prefix="krill-small-disk-"))
    shutil.copytree(folder, saved, dirs_exist_ok=True, symlinks=True)
    if shutil.which("mount") is None:
        yield False
        return
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
        capture_output=True,
        check=False,
        timeout=10,
    )
    if mounted.returncode != 0:
        shutil.rmtree(saved, ignore_errors=True)
        yield False
        return
    try:
        shutil.copytree(saved, folder, dirs_exist_ok=True, symlinks=True)
        yield True
    finally:
        # Lazy: a process that still has a file open there cannot keep the mount alive.
        subprocess.run(["umount", "-l", str(folder)], capture_output=True, check=False)
        shutil.rmtree(saved, ignore_errors=True)


def fill(folder: Path) -> None:
    """Write a file into `folder` until the disk under it is full."""
    with (folder / "filler.bin").open("wb") as out:
        try:
            while True:
                out.write(b"\0" * 65536)
                out.flush()
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
