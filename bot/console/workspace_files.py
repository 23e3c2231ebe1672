"""The workspace's markdown files as the console edits them: which files there are, reading
one with a version (a digest of its bytes), and saving atomically only over the version the
operator opened, so a concurrent edit on the host is never overwritten. Paths that leave
the workspace, or name anything but a markdown file, are refused."""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bot.memory.paths import NOTES_DIR
from bot.skills.catalog import SKILLS_DIR

SUFFIX = ".md"


class PathRefused(ValueError):
    """A path the console will not read or write."""


class ChangedOnDisk(Exception):
    """The file is no longer the version the operator opened."""


@dataclass(frozen=True, slots=True)
class FileText:
    name: str
    text: str
    version: str  # "" for a file that does not exist yet


def version_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def list_markdown(root: Path) -> list[str]:
    """The markdown files at the workspace's top level and under memory/ and skills/,
    sorted, without hidden files or anything a link leads out of the workspace."""
    found = [p.name for p in root.glob(f"*{SUFFIX}") if p.is_file()]
    for folder in (root / NOTES_DIR, root / SKILLS_DIR):
        if not folder.is_dir():
            continue
        for path in folder.rglob(f"*{SUFFIX}"):
            relative = path.relative_to(root)
            if any(part.startswith(".") for part in relative.parts) or not path.is_file():
                continue
            with contextlib.suppress(PathRefused):
                resolve(root, relative.as_posix())
                found.append(relative.as_posix())
    top = sorted(n for n in found if "/" not in n)
    return top + sorted(n for n in found if "/" in n)


def resolve(root: Path, name: str) -> Path:
    """The file `name` (relative, with "/") inside `root`; raises PathRefused otherwise."""
    relative = Path(name)
    if (
        not name
        or relative.is_absolute()
        or ".." in relative.parts
        or relative.suffix != SUFFIX
        or any(part.startswith(".") for part in relative.parts)
    ):
        raise PathRefused(f"{name!r} is not a markdown file inside the workspace")
    base = root.resolve()
    target = (base / relative).resolve()
    if not target.is_relative_to(base):
        raise PathRefused(f"{name!r} leads outside the workspace")
    return base / relative


def read(root: Path, name: str) -> FileText:
    path = resolve(root, name)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return FileText(name, "", "")
    except IsADirectoryError:
        raise PathRefused(f"{name!r} is a folder") from None
    return FileText(name, data.decode("utf-8", errors="replace"), version_of(data))


def save(root: Path, name: str, text: str, opened_version: str) -> FileText:
    """Replace `name` with `text` in one step (a reader sees the old or the new file, never
    half), if it is still `opened_version`; raises ChangedOnDisk when it is not."""
    path = resolve(root, name)
    if read(root, name).version != opened_version:
        raise ChangedOnDisk(name)
    data = text.replace("\r\n", "\n").encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        with contextlib.suppress(FileNotFoundError):
            os.chmod(temp, path.stat().st_mode & 0o777)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise
    return FileText(name, data.decode("utf-8"), version_of(data))
