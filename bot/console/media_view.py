"""The files in a person's turn as the console shows them: images as small thumbnails, other
files as a line (name, type, size, a voice note's transcript), and the route that serves a
session's own media bytes to the logged-in operator."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable
from typing import Protocol

from aiohttp import web
from markupsafe import Markup

from bot.console.layout import count, join, url
from bot.store.base import TranscriptStore
from bot.transcript import MediaForm, MediaRef, PersonTurn

THUMB_EDGE = 160
MEDIA_PATH = "/admin/media"
SHA256 = re.compile(r"[0-9a-f]{64}")
# Served inline only as these types; anything else a person sent (an .html file, say) is a
# download, so it can never run as a page of the console's origin.
INLINE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})


class MediaReader(Protocol):
    def read(self, sha256: str) -> bytes: ...


def media_url(sha256: str, session_id: str) -> str:
    return url(f"{MEDIA_PATH}/{sha256}", session=session_id)


def _thumb_size(width: int, height: int) -> tuple[int, int]:
    if width <= 0 or height <= 0:
        return THUMB_EDGE, THUMB_EDGE
    scale = min(1.0, THUMB_EDGE / max(width, height))
    return max(1, round(width * scale)), max(1, round(height * scale))


def _one(ref: MediaRef, session_id: str) -> Markup:
    if ref.form is MediaForm.IMAGE and ref.sha256:
        width, height = _thumb_size(ref.width, ref.height)
        return Markup(
            '<a class="media-thumb" href="{link}"><img src="{link}" alt="{name}" '
            'width="{width}" height="{height}" loading="lazy" data-testid="media-thumb"></a>'
        ).format(link=media_url(ref.sha256, session_id), name=ref.name, width=width, height=height)
    name: Markup | str = ref.name
    if ref.sha256:
        name = Markup('<a href="{}">{}</a>').format(media_url(ref.sha256, session_id), ref.name)
    said = ref.text if ref.form is MediaForm.TRANSCRIPT else ref.note
    detail = Markup('<div class="text">{}</div>').format(said) if said else ""
    return Markup(
        '<div class="media-file" data-testid="media-file">{} · {} · {} bytes{}</div>'
    ).format(name, ref.mime or "unknown type", count(ref.size), detail)


def render_media(refs: Iterable[MediaRef], session_id: str) -> Markup:
    parts = [_one(ref, session_id) for ref in refs]
    return Markup('<div class="media">{}</div>').format(join(parts)) if parts else Markup("")


class MediaRoute:
    """`GET /admin/media/<sha256>?session=<id>`: only a file that session's transcript names."""

    def __init__(self, *, transcripts: TranscriptStore, files: MediaReader) -> None:
        self.transcripts = transcripts
        self.files = files

    def routes(self) -> list[web.RouteDef]:
        return [web.get(MEDIA_PATH + "/{sha256}", self.serve)]

    async def _ref(self, sha256: str, session_id: str) -> MediaRef | None:
        for entry in await self.transcripts.transcript(session_id):
            if isinstance(entry.payload, PersonTurn):
                for message in entry.payload.messages:
                    for ref in message.media:
                        if ref.sha256 == sha256:
                            return ref
        return None

    async def serve(self, request: web.Request) -> web.Response:
        sha256 = request.match_info["sha256"]
        session_id = request.query.get("session", "")
        if not SHA256.fullmatch(sha256):
            raise web.HTTPBadRequest(text="not a media hash")
        ref = await self._ref(sha256, session_id) if session_id else None
        if ref is None:
            raise web.HTTPNotFound(text="this session has no such file")
        try:
            data = await asyncio.to_thread(self.files.read, sha256)
        except FileNotFoundError:
            raise web.HTTPNotFound(text="the file is gone from the media folder") from None
        inline = ref.mime in INLINE_TYPES
        safe_name = re.sub(r"[^\w.\- ]", "_", ref.name) or "file"
        disposition = "inline" if inline else "attachment"
        return web.Response(
            body=data,
            content_type=ref.mime if inline else "application/octet-stream",
            headers={
                "Cache-Control": "private, max-age=3600",
                "Content-Disposition": f'{disposition}; filename="{safe_name}"',
                "X-Content-Type-Options": "nosniff",
                "Content-Security-Policy": "sandbox; default-src 'none'",
            },
        )
