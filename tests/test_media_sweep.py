"""Received media leaves the disk with the last row that refers to it: the retention pass
prunes an old session's transcript, then deletes the photos only that transcript named,
on both stores, and keeps what a current session (or a file stored just now) still needs."""

from __future__ import annotations

import os
import time
from pathlib import Path

from bot.media.files import SWEEP_GRACE_SECONDS, MediaFiles
from bot.scheduler.retention import Retention
from bot.store.base import Store
from bot.transcript import ChatLine, Entry, MediaForm, MediaRef, PersonTurn
from bot.types import ChatType, SessionOrigin

KEY = "agent:main:telegram:direct:42"
ORIGIN = SessionOrigin("telegram", ChatType.DIRECT, "42", peer_id="42")
DAY = 86_400.0


def photo_turn(session_id: str, sha256: str) -> Entry:
    photo = MediaRef(MediaForm.IMAGE, "photo.jpg", "image/jpeg", 3, sha256, 1, 1)
    line = ChatLine("m-1", "telegram", "42", "look", 0.0, media=(photo,))
    return Entry(session_id, PersonTurn([line]))


def stored_long_ago(media: MediaFiles, data: bytes) -> str:
    digest = media.put(data)
    past = time.time() - SWEEP_GRACE_SECONDS - 60
    os.utime(media.path(digest), (past, past))
    return digest


async def test_retention_deletes_media_only_pruned_rows_named(
    any_store: Store, tmp_path: Path
) -> None:
    media = MediaFiles(tmp_path / "media")
    old_photo = stored_long_ago(media, b"old")
    kept_photo = stored_long_ago(media, b"kept")
    old = await any_store.get_or_create_session(KEY, ORIGIN)
    await any_store.append_entries([photo_turn(old.session_id, old_photo)])
    current = await any_store.start_new_session(KEY, ORIGIN, "/reset")
    await any_store.append_entries([photo_turn(current.session_id, kept_photo)])
    just_stored = media.put(b"arrived, its row not written yet")

    clock = time.time() + 2 * DAY  # the old session is past retention_days = 1
    retention = Retention(store=any_store, days=1, clock=lambda: clock, media=media)
    assert (await retention.run()).sessions == 1

    assert not media.path(old_photo).exists()
    assert media.read(kept_photo) == b"kept"
    assert media.read(just_stored) == b"arrived, its row not written yet"
    # Sent again: fresh again, so a sweep before its new row is written keeps it.
    assert media.put(b"kept") == kept_photo
    await any_store.prune_before(clock)
    assert media.sweep(set(), time.time()).files == 0
