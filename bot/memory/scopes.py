"""Who owns which memory (docs/contracts.md section 7, "Memory has owners"), as pure functions.

A person's DMs write under `memory/people/<channel>-<user_id>/`, a group, channel or thread
under `memory/groups/<channel>-<chat_id>[-<thread>]/`; `memory/shared/` is what the operator
publishes to everyone; `MEMORY.md` and every other file under `memory/` are the operator's,
and only DM sessions see them (with `dm_scope = "main"` the one DM session is the
operator's and writes there). An admin's DM sees everything. The index, recall and the
memory tools all filter by `visible_scopes`, so a fact said in one person's DM never
reaches another person or a group, whatever words they use.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from enum import StrEnum
from urllib.parse import quote

from bot.memory.paths import NOTES_DIR
from bot.sessions.keys import conversation_of_key, parse_session_key
from bot.store.base import VisiblePaths
from bot.types import ChatType, SessionOrigin

PEOPLE_DIR = f"{NOTES_DIR}/people"
GROUPS_DIR = f"{NOTES_DIR}/groups"
SHARED_DIR = f"{NOTES_DIR}/shared"
# Folders that belong to someone other than the operator.
OWNED_DIRS = (f"{PEOPLE_DIR}/", f"{GROUPS_DIR}/", f"{SHARED_DIR}/")


class ScopeKind(StrEnum):
    OPERATOR = "operator"  # MEMORY.md and the top-level notes; DM sessions only
    PERSON = "person"  # one person's DMs
    GROUP = "group"  # one group, channel or thread


@dataclass(frozen=True, slots=True)
class MemoryScope:
    kind: ScopeKind
    folder: str  # where this scope's daily notes go, e.g. "memory/people/telegram-42"

    @property
    def is_direct(self) -> bool:
        return self.kind != ScopeKind.GROUP

    def daily_note(self, now: dt.datetime) -> str:
        """The scope's note for the date of `now` (already in the configured zone)."""
        return f"{self.folder}/{now:%Y-%m-%d}.md"


OPERATOR = MemoryScope(ScopeKind.OPERATOR, NOTES_DIR)


def folder_name(*parts: str) -> str:
    """One folder name for ids joined by "-", safe as a single path segment: ids are
    case-folded (as session keys are) and anything but letters, digits, "_", "-", "."
    and "~" is percent-encoded, so "/" or ".." in a local user's name cannot leave the
    folder and two different ids never share one."""
    name = "-".join(quote(part.casefold(), safe="") for part in parts)
    return "%2E" + name[1:] if name.startswith(".") else name


def scope_of(origin: SessionOrigin | None, session_key: str) -> MemoryScope:
    """The scope a session writes into. `origin` is the session row's (None on rows older
    than origins: then the key says where the conversation is). Raises ValueError for a
    malformed key, so callers fail closed."""
    parts = parse_session_key(session_key)
    if parts["kind"] == "main":
        return OPERATOR
    where = origin or conversation_of_key(session_key)
    if where.chat_type == ChatType.DIRECT:
        if parts["channel"] is None and parts["peer"]:
            # A linked identity spans channels: the person's folder is named for the link.
            return MemoryScope(ScopeKind.PERSON, f"{PEOPLE_DIR}/{folder_name(parts['peer'])}")
        person = folder_name(where.channel, where.peer_id or parts["peer"] or "")
        return MemoryScope(ScopeKind.PERSON, f"{PEOPLE_DIR}/{person}")
    ids = [where.channel, where.chat_id, *([where.thread_id] if where.thread_id else [])]
    return MemoryScope(ScopeKind.GROUP, f"{GROUPS_DIR}/{folder_name(*ids)}")


def visible_scopes(scope: MemoryScope, *, admin: bool) -> VisiblePaths:
    """What a session in `scope` may read: its own folder and `memory/shared/`, plus in
    DMs the operator's files; an admin's DM (`admin`: every sender is an admin) sees all."""
    if admin and scope.is_direct:
        return VisiblePaths(everything=True)
    shared = f"{SHARED_DIR}/"
    if scope.kind == ScopeKind.OPERATOR:
        return VisiblePaths(under=(shared,), outside=OWNED_DIRS)
    operator = OWNED_DIRS if scope.kind == ScopeKind.PERSON else None
    return VisiblePaths(under=(f"{scope.folder}/", shared), outside=operator)


def writable(scope: MemoryScope) -> VisiblePaths:
    """Where a flush or `memory_append` in `scope` may write: its own folder (for the
    operator, MEMORY.md and every note outside the owned folders)."""
    if scope.kind == ScopeKind.OPERATOR:
        return VisiblePaths(outside=OWNED_DIRS)
    return VisiblePaths(under=(f"{scope.folder}/",))
