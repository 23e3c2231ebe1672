"""Media in requests. The transcript's `MediaRef`s render as image/document blocks whose
source is a `krill-media:` link (hash, name, size), so rendering stays pure and the stored
history holds no base64; `resolve_media` swaps each link for the stored bytes just before
the request is sent, or for a text placeholder for old images once the cache is cold.

A file's name and type came from the sender: they only ever appear inside an untrusted
block, each made one clean line (`clean_name`), never in Krill's own bracketed lines.
"""

from __future__ import annotations

import base64
import logging
import math
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Protocol, cast
from urllib.parse import parse_qs, urlencode, urlsplit

from anthropic.types import ContentBlockParam, MessageParam

from bot.context.blocks import content_blocks, make_message, text_block
from bot.transcript import MediaForm, MediaRef
from bot.untrusted import clean_name, wrap_untrusted

log = logging.getLogger(__name__)

SCHEME = "krill-media"
# What the API bills an image: about width x height / 750 tokens.
PIXELS_PER_TOKEN = 750
# A note is Krill's own words, but one stored by an older Krill may hold a file name.
NOTE_MAX_CHARS = 1000


class MediaReader(Protocol):
    def read(self, sha256: str) -> bytes:
        """The stored bytes under `sha256`; raises OSError when they are gone."""
        ...


@dataclass(frozen=True, slots=True)
class MediaLink:
    url: str
    sha256: str
    name: str
    mime: str
    width: int
    height: int
    marker: str = ""  # of the turn the file came in, for the untrusted block of its name

    @property
    def is_image(self) -> bool:
        return self.mime.startswith("image/")

    @property
    def tokens(self) -> int:
        return math.ceil(self.width * self.height / PIXELS_PER_TOKEN) if self.is_image else 0

    @property
    def placeholder(self) -> str:
        """docs/contracts.md's `[image: <name>, <w>x<h>]`; the name is the sender's, so the whole
        line sits inside the file's untrusted block when the turn's marker is known."""
        name = clean_name(self.name)
        if self.is_image:
            said = f"[image: {name}, {self.width}x{self.height}]"
        else:
            said = f"[document: {name}]"
        if not self.marker:
            return said
        meta = file_meta(self.name, self.mime)
        return wrap_untrusted(said, source="file", marker_id=self.marker, meta=meta)


def file_meta(name: str, mime: str, size: int | None = None) -> dict[str, Any]:
    """The untrusted metadata line of a file: its name and type, each one clean line."""
    meta: dict[str, Any] = {"file": clean_name(name), "type": clean_name(mime)}
    if size is not None:
        meta["bytes"] = size
    return meta


def media_url(ref: MediaRef, marker: str) -> str:
    query = {"name": ref.name, "mime": ref.mime, "w": ref.width, "h": ref.height, "m": marker}
    return f"{SCHEME}:{ref.sha256}?{urlencode(query)}"


def parse_link(block: Any) -> MediaLink | None:
    """The link of an image/document block that still points at stored media, or None."""
    if not isinstance(block, dict) or block.get("type") not in ("image", "document"):
        return None
    source = block.get("source")
    url = source.get("url", "") if isinstance(source, dict) else ""
    if source is None or source.get("type") != "url" or not url.startswith(f"{SCHEME}:"):
        return None
    parts = urlsplit(url)
    query = {k: v[0] for k, v in parse_qs(parts.query).items()}
    return MediaLink(
        url,
        parts.path,
        query.get("name", "file"),
        query.get("mime", ""),
        int(query.get("w", "0")),
        int(query.get("h", "0")),
        query.get("m", ""),
    )


def media_blocks(ref: MediaRef, marker: str) -> list[ContentBlockParam]:
    """The blocks one received file adds to a person's turn."""
    meta = file_meta(ref.name, ref.mime, ref.size)
    match ref.form:
        case MediaForm.IMAGE:
            source = {"type": "url", "url": media_url(ref, marker)}
            return [cast(ContentBlockParam, {"type": "image", "source": source})]
        case MediaForm.PDF:
            source = {"type": "url", "url": media_url(ref, marker)}
            return [cast(ContentBlockParam, {"type": "document", "source": source})]
        case MediaForm.TEXT:
            text = wrap_untrusted(ref.text, source="file", marker_id=marker, meta=meta)
            return [text_block(f"[File sent by the person]\n{text}")]
        case MediaForm.TRANSCRIPT:
            body = wrap_untrusted(ref.text, source="voice-transcript", marker_id=marker, meta=meta)
            return [text_block(f"[Transcript of a voice note the person sent]\n{body}")]
    named = wrap_untrusted("", source="file", marker_id=marker, meta=meta)
    return [text_block(f"{clean_name(ref.note, NOTE_MAX_CHARS)}\n{named}")]


def image_placeholders(messages: list[MessageParam], keep_turns: int) -> set[str]:
    """Links of images sent more than `keep_turns` person turns ago."""
    turns: list[set[str]] = []
    for message in messages:
        blocks = content_blocks(message)
        if message["role"] != "user" or all(b["type"] == "tool_result" for b in blocks):
            continue
        links = {link.url for b in blocks if (link := parse_link(b)) and link.is_image}
        turns.append(links)
    old = turns[: max(len(turns) - keep_turns, 0)]
    return set().union(*old) if old else set()


def _encoded(link: MediaLink, reader: MediaReader) -> ContentBlockParam | None:
    try:
        data = reader.read(link.sha256)
    except (OSError, ValueError):
        log.warning("media %s (%s) is missing; sending a placeholder", link.sha256, link.name)
        return None
    kind = "image" if link.is_image else "document"
    source = {"type": "base64", "media_type": link.mime, "data": base64.b64encode(data).decode()}
    return cast(ContentBlockParam, {"type": kind, "source": source})


def resolve_media(
    messages: list[MessageParam], reader: MediaReader | None, placeholders: Collection[str] = ()
) -> list[MessageParam]:
    """`messages` with every `krill-media:` block made sendable: base64 from `reader`, or a
    text placeholder (links in `placeholders`, everything when `reader` is None, and files
    that are gone)."""
    out: list[MessageParam] = []
    for message in messages:
        blocks = content_blocks(message)
        if message["role"] != "user" or not any(parse_link(b) for b in blocks):
            out.append(message)
            continue
        new_blocks: list[ContentBlockParam] = []
        for block in blocks:
            link = parse_link(block)
            if link is None:
                new_blocks.append(block)
                continue
            encoded = None
            if reader is not None and link.url not in placeholders:
                encoded = _encoded(link, reader)
            new_blocks.append(encoded or text_block(link.placeholder))
        out.append(make_message("user", new_blocks))
    return out
