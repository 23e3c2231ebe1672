"""Display names as the channels report them (a direct chat's person, a group's title, a
forum topic's name), kept in the store for the console. A name is written only when it
differs from the one this process last wrote, so a busy chat adds no write per message, and
a failed write is logged, never the message's failure."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from cachetools import LRUCache

from bot.store.names import NameKey, NameKind, NameStore
from bot.types import ChatType, InboundMessage

log = logging.getLogger(__name__)

# Names remembered as written, per process: more than the people and chats of a busy
# deployment, few enough to stay small (a name forgotten here is only written once more).
REMEMBERED = 10_000


def names_in(msg: InboundMessage) -> list[tuple[NameKey, str]]:
    """The names `msg` tells about the conversation its session is for: the person of a
    direct chat, else the chat's title, or the topic's when the message is in one. Group
    members' own names are not kept: no page shows them."""
    if msg.chat_type == ChatType.DIRECT:
        found = [(NameKey(msg.channel, NameKind.PERSON, msg.user_id), msg.user_name)]
    elif msg.thread_id and msg.topic_title:
        topic = NameKey(msg.channel, NameKind.TOPIC, f"{msg.chat_id}:{msg.thread_id}")
        found = [(topic, msg.chat_title)]
    else:
        found = [(NameKey(msg.channel, NameKind.CHAT, msg.chat_id), msg.chat_title)]
    return [(key, " ".join(name.split())) for key, name in found if name.strip()]


class DisplayNames:
    def __init__(self, store: NameStore, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.clock = clock
        self._written: LRUCache[NameKey, str] = LRUCache(REMEMBERED)

    async def seen(self, msg: InboundMessage) -> None:
        for key, name in names_in(msg):
            await self.note(key, name)

    async def note(self, key: NameKey, name: str) -> None:
        """Keep `name` for `key` if it changed since this process last wrote it."""
        if not name or self._written.get(key) == name:
            return
        try:
            await self.store.name_put(key, name, at=self.clock())
        except Exception:  # a name is a nicety: the message it came with goes on
            log.warning(
                "could not store the name of %s %s:%s",
                key.kind,
                key.channel,
                key.platform_id,
                exc_info=True,
            )
            return
        self._written[key] = name
