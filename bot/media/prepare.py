"""From an adapter's `Attachment`s to the `MediaRef`s a person's turn keeps: bytes stored on
arrival, then per file one form the model can read (image, PDF, text, transcript) or a note
saying what the file was and why the model cannot open it."""

from __future__ import annotations

import asyncio
import logging
from pathlib import PurePosixPath

from bot.config import MediaConfig
from bot.media.files import MediaFiles
from bot.media.images import prepare_image
from bot.media.transcribe import Transcriber, TranscriptionUnavailable
from bot.transcript import MediaForm, MediaRef
from bot.types import TOO_LARGE, Attachment, MediaKind

log = logging.getLogger(__name__)

TEXT_SUFFIXES = frozenset(
    ".txt .md .markdown .csv .tsv .json .jsonl .yaml .yml .toml .ini .cfg .conf .log .xml "
    ".html .htm .css .js .ts .tsx .jsx .py .rb .go .rs .java .kt .c .h .cc .cpp .hpp .cs "
    ".php .sh .bash .zsh .sql .swift .scala .lua .pl .r .tex .srt .vtt .diff .patch".split()
)
TEXT_MIMES = frozenset(
    "application/json application/xml application/x-yaml application/yaml application/toml "
    "application/javascript application/x-sh application/sql".split()
)


def human_size(size: int) -> str:
    if size >= 1_000_000:
        return f"{size / 1_000_000:.1f} MB"
    if size >= 1_000:
        return f"{size / 1_000:.0f} kB"
    return f"{size} bytes"


def problem_notice(att: Attachment, limit: int) -> str | None:
    """What the person is told about a file Krill could not take, or None."""
    if att.error == TOO_LARGE:
        return (
            f"I can't read {att.name}: it is {human_size(att.size)}, over the "
            f"{human_size(limit)} limit for files."
        )
    if att.error:
        return f"I couldn't get {att.name}: {att.error}."
    return None


def _is_pdf(att: Attachment) -> bool:
    return att.mime == "application/pdf" or att.name.lower().endswith(".pdf")


def _is_text(att: Attachment) -> bool:
    mime = att.mime.split(";")[0].strip().lower()
    return (
        mime.startswith("text/")
        or mime in TEXT_MIMES
        or PurePosixPath(att.name.lower()).suffix in TEXT_SUFFIXES
    )


def decode_text(data: bytes, limit: int) -> str | None:
    """Text of a text-like file, cut at `limit` characters; None when it looks binary."""
    if b"\x00" in data[:8192]:
        return None
    text = data.decode("utf-8", errors="replace")
    if len(text) > limit:
        text = text[:limit] + f"\n[file cut: only the first {limit:,} characters are shown]"
    return text


class MediaPreparer:
    def __init__(self, config: MediaConfig, files: MediaFiles, transcriber: Transcriber) -> None:
        self.config = config
        self.files = files
        self.transcriber = transcriber

    async def store_incoming(self, attachments: list[Attachment]) -> None:
        """Move each attachment's bytes to disk (keeping only the hash), so the inbound row
        that records the message holds no file."""
        for att in attachments:
            if att.data is not None:
                att.sha256 = await asyncio.to_thread(self.files.put, att.data)
                att.size = att.size or len(att.data)
                att.data = None

    async def refs(self, attachments: list[Attachment]) -> tuple[MediaRef, ...]:
        # At once: Pillow releases the GIL, so an album's photos are prepared in parallel.
        return tuple(await asyncio.gather(*(self._ref(att) for att in attachments)))

    def _note(self, att: Attachment, why: str) -> MediaRef:
        kind = att.mime or str(att.kind)
        note = f"[{att.kind}: {att.name} ({kind}, {human_size(att.size)}) - {why}]"
        return MediaRef(MediaForm.NOTE, att.name, att.mime, att.size, note=note)

    async def _ref(self, att: Attachment) -> MediaRef:
        if att.error == TOO_LARGE:
            limit = human_size(self.config.max_bytes)
            return self._note(att, f"not read: over the {limit} limit; the person was told")
        if att.error or not att.sha256:
            return self._note(att, f"could not be downloaded: {att.error or 'no data'}")
        try:
            data = await asyncio.to_thread(self.files.read, att.sha256)
        except OSError:
            log.warning("media %s of %s is missing from the media folder", att.sha256, att.name)
            return self._note(att, "its stored copy is missing")
        if att.kind == MediaKind.AUDIO:
            return await self._transcribe(att, data)
        if att.kind == MediaKind.IMAGE or att.mime.startswith("image/"):
            return await self._image(att, data)
        if _is_pdf(att):
            return MediaRef(MediaForm.PDF, att.name, "application/pdf", att.size, att.sha256)
        if _is_text(att):
            text = decode_text(data, self.config.text_max_chars)
            if text is not None:
                return MediaRef(MediaForm.TEXT, att.name, att.mime, att.size, att.sha256, text=text)
        return self._note(att, "a file type the model cannot open")

    async def _image(self, att: Attachment, data: bytes) -> MediaRef:
        try:
            image = await asyncio.to_thread(prepare_image, data, self.config.image_max_edge)
        except ValueError as exc:
            return self._note(att, f"could not be opened as an image: {exc}")
        sha = await asyncio.to_thread(self.files.put, image.data)
        return MediaRef(
            MediaForm.IMAGE, att.name, image.mime, len(image.data), sha, image.width, image.height
        )

    async def _transcribe(self, att: Attachment, data: bytes) -> MediaRef:
        try:
            text = await self.transcriber.transcribe(data, att.name, att.mime)
        except TranscriptionUnavailable as exc:
            log.warning("voice note %s not transcribed: %s", att.name, exc)
            return self._note(att, f"not transcribed: {exc}; tell the person why")
        text = text[: self.config.text_max_chars]
        return MediaRef(MediaForm.TRANSCRIPT, att.name, att.mime, att.size, att.sha256, text=text)
