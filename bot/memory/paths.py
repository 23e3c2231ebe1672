"""Which workspace files count as memory, and the checks that keep the memory tools inside them.

Memory is `MEMORY.md` (curated, private to DMs) and Markdown files under `memory/` (daily
notes). Anything else, `..`, absolute paths, symlinks resolving out of the workspace, and
notes that live elsewhere (a link out of `memory/`, or a hard link: a second name for a file
whose other name may be anywhere, MEMORY.md included) are refused with a `MemoryPathError`
whose message the model can act on.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

CURATED_FILE = "MEMORY.md"
NOTES_DIR = "memory"
NOTE_SUFFIX = ".md"
# Files never shown to a group session: the curated memory holds the owner's private facts.
PRIVATE_FILES = frozenset({CURATED_FILE})


class MemoryPathError(ValueError):
    """A path the memory tools may not touch; the message says what is allowed."""


def normalize_memory_path(raw: str) -> str:
    """Check `raw` is a memory file name and return it in canonical form (`memory/x.md`).

    Pure: looks at the string only. Raises MemoryPathError for anything else.
    """
    text = raw.strip().replace("\\", "/")
    if not text:
        raise MemoryPathError("path is empty; use MEMORY.md or memory/<name>.md")
    if text.startswith("/") or (len(text) > 1 and text[1] == ":"):
        raise MemoryPathError(f"{raw!r} is absolute; use a workspace-relative path")
    parts = [p for p in PurePosixPath(text).parts if p != "."]
    if ".." in parts:
        raise MemoryPathError(f"{raw!r} leaves the memory folder ('..' is not allowed)")
    canonical = "/".join(parts)
    if canonical == CURATED_FILE:
        return canonical
    if len(parts) >= 2 and parts[0] == NOTES_DIR and canonical.endswith(NOTE_SUFFIX):
        return canonical
    raise MemoryPathError(
        f"{raw!r} is not a memory file; only {CURATED_FILE} and {NOTES_DIR}/*{NOTE_SUFFIX} "
        "can be read or written"
    )


def is_private(path: str) -> bool:
    return path in PRIVATE_FILES


def is_private_file(workspace: Path, name: str, real: Path) -> bool:
    """True for MEMORY.md under any name, including a note that is a link to it."""
    return is_private(name) or real == (workspace / CURATED_FILE).resolve()


def lives_elsewhere(real: Path, notes: Path, curated: Path, links: int) -> bool:
    """Whether a note whose target is `real` (with `links` hard links) is really another
    file: a link out of the notes folder (except to MEMORY.md, which the privacy check
    catches), or one of several hard links, whose other names can be anywhere."""
    return links > 1 or not (real.is_relative_to(notes) or real == curated)


def resolve_memory_path(workspace: Path, raw: str) -> tuple[str, Path]:
    """`(canonical name, real path)` of a memory file, following symlinks only inside the
    workspace. The file need not exist. Raises MemoryPathError otherwise."""
    name = normalize_memory_path(raw)
    root = workspace.resolve()
    real = (root / name).resolve()
    if not real.is_relative_to(root):
        raise MemoryPathError(f"{name!r} is a link that points outside the workspace")
    if name != CURATED_FILE:
        try:
            links = real.stat().st_nlink
        except OSError:
            links = 1  # not there (yet): appending creates a plain file
        curated = (root / CURATED_FILE).resolve()
        if lives_elsewhere(real, (root / NOTES_DIR).resolve(), curated, links):
            raise MemoryPathError(
                f"{name!r} is a link to a file outside {NOTES_DIR}/ (or a hard link); only "
                "plain notes can be read or written"
            )
    return name, real


@dataclass(frozen=True, slots=True)
class MemoryFile:
    name: str  # canonical, e.g. "memory/2025-03-14.md"
    real: str  # the file to read (a link's target)
    mtime_ns: int
    size: int


def _walk_notes(directory: str, prefix: str, notes: Path, curated: Path) -> Iterator[MemoryFile]:
    # Plain scandir and strings: the check before every search stats every note, so it must
    # stay cheap; only symlinks pay for a resolve.
    try:
        scan = os.scandir(directory)
    except OSError:
        return
    with scan:
        for entry in scan:
            name = entry.name
            if name.startswith("."):
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    yield from _walk_notes(entry.path, f"{prefix}{name}/", notes, curated)
                    continue
                if not name.endswith(NOTE_SUFFIX):
                    continue
                real = entry.path
                st = entry.stat()  # follows a link to its target
                if entry.is_symlink():
                    target = Path(entry.path).resolve()
                    # MEMORY.md under another name would reach group sessions.
                    if target == curated or lives_elsewhere(target, notes, curated, st.st_nlink):
                        continue
                    real = str(target)
                elif st.st_nlink > 1:
                    continue  # a hard link: its other name may be MEMORY.md or anything
            except OSError:
                continue  # vanished while listing; the next check settles it
            if not entry.is_dir():  # a link to a folder is not followed
                yield MemoryFile(f"{prefix}{name}", real, st.st_mtime_ns, st.st_size)


def iter_memory_files(workspace: Path) -> Iterator[MemoryFile]:
    """Every existing memory file with its stat (unordered).

    Links that lead out of the workspace are skipped, as the tools would refuse them, and
    so are notes linking to MEMORY.md, which would otherwise reach group sessions. Linked
    folders inside memory/ are not followed.
    """
    root = workspace.resolve()
    curated = (root / CURATED_FILE).resolve()
    if curated.is_relative_to(root):
        try:
            st = curated.stat()
        except OSError:
            pass
        else:
            yield MemoryFile(CURATED_FILE, str(curated), st.st_mtime_ns, st.st_size)
    notes = root / NOTES_DIR
    if notes.is_symlink() and not notes.resolve().is_relative_to(root):
        return
    yield from _walk_notes(str(notes), f"{NOTES_DIR}/", notes.resolve(), curated)
