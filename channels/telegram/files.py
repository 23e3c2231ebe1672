"""Files out to Telegram (tool `send_file`): sendPhoto for images within the photo limit,
sendDocument for everything else, into the chat and forum topic of the address."""

from __future__ import annotations

import asyncio
from pathlib import Path

from telegram import Bot, InputFile

from bot.types import Address, OutboundFile

# sendPhoto takes photos up to 10 MB; larger images go as documents (kept uncompressed).
PHOTO_MAX_BYTES = 10 * 1024 * 1024
CAPTION_MAX_CHARS = 1024


async def send_file(bot: Bot, chat_id: int, address: Address, file: OutboundFile) -> str:
    data = await asyncio.to_thread(Path(file.path).read_bytes)
    caption = file.caption[:CAPTION_MAX_CHARS] or None
    thread = int(address.thread_id) if address.thread_id else None
    upload = InputFile(data, filename=file.name)
    if file.is_image and len(data) <= PHOTO_MAX_BYTES:
        sent = await bot.send_photo(chat_id, upload, caption=caption, message_thread_id=thread)
    else:
        sent = await bot.send_document(chat_id, upload, caption=caption, message_thread_id=thread)
    return str(sent.message_id)
