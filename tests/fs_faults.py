"""Make a folder really read-only for a test or benchmark, even when running as root.

`chmod` is enough for ordinary users; root ignores it, so the immutable attribute
(`chattr +i`) is used as well where the filesystem supports it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
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
