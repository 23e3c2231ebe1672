"""From an adapter's `Attachment`s to the `MediaRef`s a person's turn keeps.

When the gateway accepts a message, its files are stored by hash and its images prepared,
one at a time in the whole process, so an album (or many chats at once) never holds more
than one decoded picture. The turn only reads what acceptance made: a turn started again
after a crash never decodes anything, and an image whose preparation killed the process is
refused the next time it comes (Telegram or Slack delivering it again) instead of killing
the process again. Per file the model gets one form it can read (image, PDF, text,
transcript) or a note saying why it cannot."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import PurePosixPath

from bot.config import MediaConfig
from bot.media.files import MediaFiles
from bot.media.images import ImageRefused, prepare_image
from bot.media.transcribe import Transcriber, TranscriptionUnavailable
from bot.transcript import MediaForm, MediaRef
from bot.types import TOO_LARGE, Attachment, MediaKind
from bot.untrusted import clean_name

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


# Why an image is refused when an earlier attempt to prepare it never finished.
DIED_PREPARING = "opening it stopped Krill the last time, so it is not opened again"


def problem_notice(att: Attachment, limit: int) -> str | None:
    """What the person is told about a file Krill could not take, or None."""
    name = clean_name(att.name)
    if att.error == TOO_LARGE:
        return (
            f"I can't read {name}: it is {human_size(att.size)}, over the "
            f"{human_size(limit)} limit for files."
        )
    if att.error:
        return f"I couldn't get {name}: {att.error}."
    if att.refused:
        return f"I can't open {name}: {att.refused}."
    return None


def _is_image(att: Attachment) -> bool:
    return att.kind == MediaKind.IMAGE or att.mime.startswith("image/")


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
    # `limit` characters take at most 4 bytes each: the rest is never decoded.
    text = data[: limit * 4].decode("utf-8", errors="replace")
    if len(text) > limit or len(data) > limit * 4:
        text = text[:limit] + f"\n[file cut: only the first {limit:,} characters are shown]"
    return text


class MediaPreparer:
    def __init__(self, config: MediaConfig, files: MediaFiles, transcriber: Transcriber) -> None:
        self.config = config
        self.files = files
        self.transcriber = transcriber
        # One decoded picture in memory at a time, however many chats send at once, and
        # always on the same thread: in one malloc arena, the memory a picture leaves free
        # is reused by the next, where each worker thread's own arena would keep its share.
        self._decoding = asyncio.Lock()
        self._decoder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="krill-images")

    async def accept(self, attachments: Sequence[Attachment]) -> list[Attachment]:
        """`attachments` as the inbound row records them: bytes moved to disk (keeping only
        the hash) and images prepared, one after another. A file that cannot be prepared is
        `refused`, never an error."""
        return [await self._accept(att) for att in attachments]

    async def _accept(self, att: Attachment) -> Attachment:
        if att.data is None:  # no bytes, or stored already (a buffered group photo)
            return att
        data = att.data
        sha = await asyncio.to_thread(self.files.put, data)
        att = dataclasses.replace(att, data=None, sha256=sha, size=att.size or len(data))
        return await self._prepare_image(att, data) if _is_image(att) else att

    async def _prepare_image(self, att: Attachment, data: bytes) -> Attachment:
        name = clean_name(att.name)
        async with self._decoding:
            if not await asyncio.to_thread(self.files.begin_preparing, att.sha256):
                log.warning("image %s is refused: a process died preparing it before", name)
                return dataclasses.replace(att, refused=DIED_PREPARING)
            log.info("preparing image %s (%s)", name, human_size(len(data)))
            try:
                image = await asyncio.get_running_loop().run_in_executor(
                    self._decoder,
                    prepare_image,
                    data,
                    self.config.image_max_edge,
                    self.config.max_pixels,
                )
            except ImageRefused as exc:
                log.info("image %s refused: %s", name, exc)
                return dataclasses.replace(att, refused=str(exc))
            finally:
                await asyncio.to_thread(self.files.end_preparing, att.sha256)
        sha = await asyncio.to_thread(self.files.put, image.data)
        return dataclasses.replace(
            att,
            sha256=sha,
            mime=image.mime,
            size=len(image.data),
            width=image.width,
            height=image.height,
        )

    async def refs(self, attachments: Sequence[Attachment]) -> tuple[MediaRef, ...]:
        """What the turn keeps of each file, one after another."""
        return tuple([await self._ref(att) for att in attachments])

    def _note(self, att: Attachment, why: str) -> MediaRef:
        what = {MediaKind.IMAGE: "an image", MediaKind.AUDIO: "a voice note"}
        note = f"[{what.get(att.kind, 'a file')} the person sent - {why}]"
        return MediaRef(MediaForm.NOTE, att.name, att.mime, att.size, note=note)

    async def _ref(self, att: Attachment) -> MediaRef:
        if att.error == TOO_LARGE:
            limit = human_size(self.config.max_bytes)
            return self._note(att, f"not read: over the {limit} limit; the person was told")
        if att.error or not att.sha256:
            return self._note(att, f"could not be downloaded: {att.error or 'no data'}")
        if att.refused:
            return self._note(att, f"not shown: {att.refused}; the person was told")
        try:
            data = b"" if att.width else await asyncio.to_thread(self.files.read, att.sha256)
        except OSError:
            log.warning("media %s of %s is missing from the media folder", att.sha256, att.name)
            return self._note(att, "its stored copy is missing")
        if _is_image(att):
            if not att.width:  # accepted by a Krill that prepared images in the turn
                att = await self._prepare_image(att, data)
                if att.refused:
                    return self._note(att, f"not shown: {att.refused}; tell the person why")
            return MediaRef(
                MediaForm.IMAGE, att.name, att.mime, att.size, att.sha256, att.width, att.height
            )
        if att.kind == MediaKind.AUDIO:
            return await self._transcribe(att, data)
        if _is_pdf(att):
            return MediaRef(MediaForm.PDF, att.name, "application/pdf", att.size, att.sha256)
        if _is_text(att):
            text = decode_text(data, self.config.text_max_chars)
            if text is not None:
                return MediaRef(MediaForm.TEXT, att.name, att.mime, att.size, att.sha256, text=text)
        return self._note(att, "a file type the model cannot open")

    async def _transcribe(self, att: Attachment, data: bytes) -> MediaRef:
        try:
            text = await self.transcriber.transcribe(data, att.name, att.mime)
        except TranscriptionUnavailable as exc:
            log.warning("voice note %s not transcribed: %s", clean_name(att.name), exc)
            return self._note(att, f"not transcribed: {exc}; tell the person why")
        text = text[: self.config.text_max_chars]
        return MediaRef(MediaForm.TRANSCRIPT, att.name, att.mime, att.size, att.sha256, text=text)
