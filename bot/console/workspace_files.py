"""The workspace's markdown files as the console edits them: which files there are, reading
one with a version (a digest of its bytes), and saving atomically only over the version the
operator opened, so a concurrent edit on the host is never overwritten. Paths that leave
the workspace, or name anything but a markdown file, are refused; a save the disk refuses
(full, read-only) says why and changes nothing.

A save writes a hidden temporary file beside the target and renames it over the target. A
save killed half-way leaves that file behind: `remove_leftovers` deletes such files at
start, except one a save is writing right now (it holds a lock on it), since replicas share
the workspace.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bot.memory.paths import NOTES_DIR
from bot.skills.catalog import SKILLS_DIR

SUFFIX = ".md"
TEMP_SUFFIX = ".tmp"
# A save's temporary file: "." + the file's name + "." + random letters + ".tmp".
_TEMP_RE = re.compile(r"^\..+\.md\.[^.]+\.tmp$")
# Room left in a name for the temporary file's extra characters (most filesystems allow
# 255 bytes a name).
MAX_NAME_BYTES = 200
# The folders whose markdown files the console lists and edits, besides the top level.
_EDITABLE_FOLDERS = (NOTES_DIR, SKILLS_DIR)


class PathRefused(ValueError):
    """A path the console will not read or write."""


class ChangedOnDisk(Exception):
    """The file is no longer the version the operator opened."""


class NotSaved(Exception):
    """The disk refused the save (full, read-only, gone); the file is unchanged."""


@dataclass(frozen=True, slots=True)
class FileText:
    name: str
    text: str
    version: str  # "" for a file that does not exist yet


@dataclass(frozen=True, slots=True)
class Listed:
    """A markdown file as the workspace page lists it."""

    name: str
    size: int  # bytes (0 where `refusal` is set: an outside file is not looked at)
    refusal: str = ""  # why the console will not open it ("" when it will)


def version_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _candidates(root: Path) -> list[str]:
    """Names of the markdown files at the top level and under memory/ and skills/, without
    hidden files (and so without a save's temporary files)."""
    found = [p.name for p in root.glob(f"*{SUFFIX}") if not p.name.startswith(".") and p.is_file()]
    for folder in _EDITABLE_FOLDERS:
        if not (root / folder).is_dir():
            continue
        for path in (root / folder).rglob(f"*{SUFFIX}"):
            relative = path.relative_to(root)
            if not any(part.startswith(".") for part in relative.parts) and path.is_file():
                found.append(relative.as_posix())
    return found


def list_markdown(root: Path) -> list[Listed]:
    """The markdown files, top level first, each sorted; one a link leads out of the
    workspace from is listed with the reason the console will not open it."""
    listed = []
    for name in _candidates(root):
        try:
            size = resolve(root, name).stat().st_size
        except (PathRefused, OSError) as exc:
            # The row names the file already: "'X.md' leads outside…" -> "leads outside…".
            listed.append(Listed(name, 0, str(exc).removeprefix(f"{name!r} ")))
        else:
            listed.append(Listed(name, size))
    return sorted(listed, key=lambda f: ("/" in f.name, f.name))


def resolve(root: Path, name: str) -> Path:
    """The file `name` (relative, with "/") inside `root`; raises PathRefused otherwise."""
    if any(ord(c) < 32 or c == "\x7f" for c in name):
        raise PathRefused("a file name cannot hold control characters")
    try:
        name.encode()
    except UnicodeEncodeError:
        raise PathRefused("a file name must be valid UTF-8") from None
    relative = Path(name)
    if any(len(part.encode()) > MAX_NAME_BYTES for part in relative.parts):
        raise PathRefused(f"a file or folder name may be at most {MAX_NAME_BYTES} bytes long")
    if (
        not name
        or relative.is_absolute()
        or ".." in relative.parts
        or relative.suffix != SUFFIX
        or any(part.startswith(".") for part in relative.parts)
    ):
        raise PathRefused(f"{name!r} is not a markdown file inside the workspace")
    base = root.resolve()
    try:
        target = (base / relative).resolve()
    except RuntimeError:  # a loop of links
        raise PathRefused(f"{name!r} is a link that leads nowhere") from None
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
    except OSError as exc:
        raise PathRefused(f"cannot read {name!r}: {exc.strerror or exc}") from None
    return FileText(name, data.decode("utf-8", errors="replace"), version_of(data))


def save(root: Path, name: str, text: str, opened_version: str) -> FileText:
    """Replace `name` with `text` in one step (a reader sees the old or the new file, never
    half), if it is still `opened_version`; raises ChangedOnDisk when it is not, NotSaved
    when the disk refuses."""
    path = resolve(root, name)
    if read(root, name).version != opened_version:
        raise ChangedOnDisk(name)
    data = text.replace("\r\n", "\n").encode("utf-8")
    try:
        _replace(path, data)
    except OSError as exc:
        raise NotSaved(exc.strerror or str(exc)) from None
    return FileText(name, data.decode("utf-8"), version_of(data))


def _replace(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TEMP_SUFFIX)
    try:
        with os.fdopen(fd, "wb") as out:
            # Held until the rename: tells `remove_leftovers` this file is not left over.
            fcntl.flock(out.fileno(), fcntl.LOCK_EX)
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


def remove_leftovers(root: Path) -> list[Path]:
    """Delete the temporary files of saves that never finished (a kill, a crash) at the top
    level and under memory/ and skills/; the ones deleted."""
    folders = [root]
    for below in (root / folder for folder in _EDITABLE_FOLDERS):
        if below.is_dir():
            folders += [below, *(p for p in below.rglob("*") if p.is_dir() and not p.is_symlink())]
    removed = []
    for folder in folders:
        for path in folder.glob(f".*{TEMP_SUFFIX}"):
            if _TEMP_RE.match(path.name) and path.is_file() and _unlink_unless_locked(path):
                removed.append(path)
    return removed


def _unlink_unless_locked(path: Path) -> bool:
    try:
        with path.open("rb") as held:
            fcntl.flock(held.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            path.unlink()
    except (BlockingIOError, FileNotFoundError):
        return False  # a save is writing it, or has just renamed it into place
    return True
