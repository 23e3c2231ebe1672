"""Display names beside session keys: the person of a direct chat, the title of a group or
channel, the name of a forum topic, as the platform last gave them. One row per
(channel, kind, platform id), written when a name changes; retention deletes a name once
no stored session refers to it."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from bot.store.db import Db
from bot.types import ChatType, SessionOrigin


class NameKind(StrEnum):
    PERSON = "person"  # platform id: the user id (the peer of a direct session)
    CHAT = "chat"  # platform id: the chat or channel id
    TOPIC = "topic"  # platform id: "<chat id>:<topic id>"


@dataclass(frozen=True, slots=True)
class NameKey:
    channel: str
    kind: NameKind
    platform_id: str


class NameStore(Protocol):
    async def name_put(self, key: NameKey, name: str, *, at: float) -> None:
        """Keep `name` for `key`, replacing the one stored."""
        ...

    async def names_all(self) -> dict[NameKey, str]:
        """Every stored name (one row per direct peer and per chat the service knows)."""
        ...


class NameTables:
    db: Db

    async def name_put(self, key: NameKey, name: str, *, at: float) -> None:
        await self.db.execute(
            "INSERT INTO display_names(channel, kind, platform_id, name, updated_at)"
            " VALUES (?, ?, ?, ?, ?) ON CONFLICT (channel, kind, platform_id) DO UPDATE SET"
            " name = excluded.name, updated_at = excluded.updated_at",
            *(key.channel, str(key.kind), key.platform_id, name, at),
        )

    async def names_all(self) -> dict[NameKey, str]:
        rows = await self.db.fetch("SELECT channel, kind, platform_id, name FROM display_names")
        return {NameKey(c, NameKind(k), pid): name for c, k, pid, name in rows}


def name_of_session(names: dict[NameKey, str], origin: SessionOrigin | None) -> str:
    """The name to show beside a session's key: its person's for a direct chat, its topic's
    or else its chat's for the rest; "" when none was seen."""
    if origin is None:
        return ""
    if origin.chat_type == ChatType.DIRECT:
        return names.get(NameKey(origin.channel, NameKind.PERSON, origin.peer_id or ""), "")
    topic = NameKey(origin.channel, NameKind.TOPIC, f"{origin.chat_id}:{origin.thread_id}")
    if origin.thread_id and topic in names:
        return names[topic]
    return names.get(NameKey(origin.channel, NameKind.CHAT, origin.chat_id), "")
