"""Files in Telegram messages -> `Attachment`s: photos (the largest size within the limit),
documents, voice notes, audio and video notes, downloaded with getFile and the file URL
under `telegram.api_base_url`. Files over the limit are never requested.

The download is always an HTTP request to the Bot API's file endpoint. python-telegram-bot
reads a `file_path` that names a file on this machine straight from disk (meant for a local
Bot API server), so a server answering getFile with, say, the path of krill.toml would put
the bot token into a model request; Krill never lets it."""

from __future__ import annotations

import dataclasses
import logging
from urllib.parse import quote

from telegram import Bot, File, Message
from telegram.error import TelegramError

from bot.types import TOO_LARGE, Attachment, InboundMessage, MediaKind
from channels.telegram.mapping import placeholder

log = logging.getLogger(__name__)


def _wanted(message: Message, max_bytes: int) -> tuple[Attachment, str] | None:
    """The attachment `message` carries (without bytes) and its file id, or None."""
    if message.photo:
        fitting = [p for p in message.photo if (p.file_size or 0) <= max_bytes]
        photo = max(fitting or message.photo, key=lambda p: p.width * p.height)
        name = f"photo_{message.message_id}.jpg"
        return Attachment(MediaKind.IMAGE, name, "image/jpeg", photo.file_size or 0), photo.file_id
    if message.document:
        doc = message.document
        mime = doc.mime_type or ""
        kind = MediaKind.IMAGE if mime.startswith("image/") else MediaKind.FILE
        name = doc.file_name or f"document_{message.message_id}"
        return Attachment(kind, name, mime, doc.file_size or 0), doc.file_id
    for sound, default_mime, suffix in (
        (message.voice, "audio/ogg", ".oga"),
        (message.audio, "audio/mpeg", ".mp3"),
        (message.video_note, "video/mp4", ".mp4"),
    ):
        if sound:
            mime = getattr(sound, "mime_type", None) or default_mime
            name = getattr(sound, "file_name", None) or f"voice_{message.message_id}{suffix}"
            return Attachment(MediaKind.AUDIO, name, mime, sound.file_size or 0), sound.file_id
    return None


def file_url(bot: Bot, file: File) -> str:
    """Where `file` is fetched: its path under the Bot API's file endpoint, whatever the
    path looks like (python-telegram-bot has prefixed it only if no local file has that
    name)."""
    base = bot.base_file_url
    path = file.file_path or ""
    relative = path[len(base) + 1 :] if path.startswith(base + "/") else path.lstrip("/")
    return f"{base}/{quote(relative)}"


async def download(bot: Bot, message: Message, max_bytes: int) -> list[Attachment]:
    """The files of `message`, fetched; an attachment says why when it has no bytes."""
    wanted = _wanted(message, max_bytes)
    if wanted is None:
        return []
    att, file_id = wanted
    if att.size > max_bytes:
        att.error = TOO_LARGE
        return [att]
    try:
        file = await bot.get_file(file_id)
        if (file.file_size or 0) > max_bytes:
            att.size, att.error = file.file_size or 0, TOO_LARGE
            return [att]
        data = await bot.request.retrieve(file_url(bot, file))
    except TelegramError as exc:
        log.warning("Telegram: could not download %s: %s", att.name, exc)
        att.error = "Telegram would not hand the file over"
        return [att]
    if len(data) > max_bytes:
        att.size, att.error = len(data), TOO_LARGE
        return [att]
    att.data, att.size = data, len(data)
    return [att]


async def attach(bot: Bot, message: Message, msg: InboundMessage, max_bytes: int) -> InboundMessage:
    """`msg` with the files of `message`; its text becomes the caption alone, since the
    model now gets the file itself instead of a `[photo]` stand-in."""
    files = await download(bot, message, max_bytes)
    stand_in = placeholder(message)
    text = msg.text
    if files and stand_in and text.startswith(stand_in):
        text = text[len(stand_in) :].lstrip("\n")
    return dataclasses.replace(msg, attachments=files, text=text)
