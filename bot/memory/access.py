"""What a session may read from the workspace: the one decision behind every tool that reads
a workspace path the model names (memory_get, send_file, read_tool_result).

- Memory (`MEMORY.md` and everything under `memory/`) follows its owners
  (`bot.memory.scopes`): a session reads its own scope and `memory/shared/`, a DM also the
  operator's files, an admin's DM everything.
- Kept tool results (`tool-results/<date>/<owner>/`) belong to the conversation that
  produced them (`bot.tools.results.result_owner`); an admin's DM reads any.
- Every other workspace file may be read by every session: the bootstrap files reach every
  prompt anyway, and what else lies there is the operator's choice.

A file is judged by the name asked for and by what it really is (a symlink's target), so a
link cannot carry a note out of its scope, and names are compared case-folded, so a
case-insensitive disk cannot let `Memory/People/...` past. A file with several hard links,
whose other name may be anyone's note, is read only in an admin's DM. A refusal comes
before any look at the file, so it never says whether another scope's file exists.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, replace
from pathlib import Path

from bot.memory.paths import CURATED_FILE, NOTES_DIR
from bot.memory.scopes import scope_of, visible_scopes
from bot.store.base import VisiblePaths
from bot.tools.registry import ToolContext, ToolError
from bot.tools.results import RESULTS_DIR, result_owner
from bot.untrusted import clean_name

NOT_YOURS = (
    "{name} is not part of this conversation's memory; it can read its own notes, "
    "memory/shared/ and, in direct messages, the operator's notes"
)
RESULT_NOT_YOURS = "{name} is a tool result kept for another conversation"
OUTSIDE = "{name}: only files inside the workspace can be read or sent"
MISSING = "{name} does not exist in the workspace (or is not a regular file)"
HARD_LINK = (
    "{name} is a hard link (a file with several names, one of which may be another "
    "conversation's note); only an admin's direct messages may read it"
)
_CURATED = CURATED_FILE.casefold()
_NOTES = f"{NOTES_DIR}/"
# tool-results/<date>/<owner>/<id>.txt
_RESULT_DEPTH = 4


@dataclass(frozen=True, slots=True)
class Reader:
    """What one session may read."""

    memory: VisiblePaths  # the memory it sees (case-folded folder names)
    results: str  # the owner folder of its own kept results, case-folded
    everything: bool = False  # an admin's DM


def reader_of(ctx: ToolContext) -> Reader:
    """The reader a tool call's session is. A malformed key sees no memory (fail closed)."""
    results = result_owner(ctx.session_key).casefold()
    try:
        scope = scope_of(ctx.origin, ctx.session_key)
    except ValueError:
        return Reader(VisiblePaths(), results)
    everything = ctx.admin and scope.is_direct
    return Reader(_folded(visible_scopes(scope, admin=ctx.admin)), results, everything)


def _folded(visible: VisiblePaths) -> VisiblePaths:
    outside = visible.outside
    return replace(
        visible,
        under=tuple(folder.casefold() for folder in visible.under),
        outside=None if outside is None else tuple(folder.casefold() for folder in outside),
    )


def refusal(name: str, reader: Reader) -> str | None:
    """Why `reader` may not read the workspace file `name` ("/"-separated, relative), as a
    template taking `{name}`; None when it may. Pure."""
    if reader.everything:
        return None
    folded = name.casefold()
    if folded == _CURATED or folded.startswith(_NOTES):
        return None if reader.memory.allows(folded) else NOT_YOURS
    parts = folded.split("/")
    if parts[0] == RESULTS_DIR:
        mine = len(parts) == _RESULT_DEPTH and parts[2] == reader.results
        return None if mine else RESULT_NOT_YOURS
    return None


def readable(ctx: ToolContext, raw: str) -> Path:
    """The real path of the workspace file `raw` (relative to the workspace) when the tool
    call's session may read it; a ToolError the model can read otherwise."""
    shown = clean_name(raw)
    text = raw.strip()
    if not text:
        raise ToolError("the path is empty; give a path relative to the workspace")
    root = ctx.workspace.resolve()
    asked = Path(os.path.normpath(root / text))
    real = (root / text).resolve()
    if not (asked.is_relative_to(root) and real.is_relative_to(root)):
        raise ToolError(OUTSIDE.format(name=shown))
    reader = reader_of(ctx)
    for path in (asked, real):
        why = refusal(path.relative_to(root).as_posix(), reader)
        if why is not None:
            raise ToolError(why.format(name=shown))
    try:
        info = real.stat()
    except OSError:
        raise ToolError(MISSING.format(name=shown)) from None
    if not stat.S_ISREG(info.st_mode):  # a folder, or a FIFO that would block the read
        raise ToolError(MISSING.format(name=shown))
    if info.st_nlink > 1 and not reader.everything:
        raise ToolError(HARD_LINK.format(name=shown))
    return real
