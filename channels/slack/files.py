"""Files between Slack and Krill.

In: files in Slack messages -> `Attachment`s. Each file is fetched from its
`url_private_download` with the bot token as Bearer, only from Slack's file host or the
host of `slack.api_base_url` (the token must never go anywhere else), and never past
`media.max_bytes`. Slack answers a request it will not serve with its HTML sign-in page,
so an HTML body for a file that is no HTML file counts as a failed download.

Out (tool `send_file`): the external upload flow (files.getUploadURLExternal, the upload,
files.completeUploadExternal) into the conversation and thread of the address.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from slack_sdk.web.async_client import AsyncWebClient

from bot.types import TOO_LARGE, Address, Attachment, MediaKind, OutboundFile

log = logging.getLogger(__name__)

SLACK_FILE_HOST = "files.slack.com"
CHUNK = 64 * 1024
TIMEOUT = aiohttp.ClientTimeout(total=120)


def _kind(item: Mapping[str, Any]) -> MediaKind:
    mime = str(item.get("mimetype") or "")
    if mime.startswith("image/"):
        return MediaKind.IMAGE
    if mime.startswith("audio/") or item.get("subtype") == "slack_audio":
        return MediaKind.AUDIO
    return MediaKind.FILE


class SlackFiles:
    def __init__(self, token: str, api_base_url: str, max_bytes: int) -> None:
        self.token = token
        self.max_bytes = max_bytes
        api_host = urlsplit(api_base_url).hostname or ""
        self.allowed_hosts = frozenset({SLACK_FILE_HOST, api_host} - {""})

    async def download(self, files: Sequence[Mapping[str, Any]]) -> list[Attachment]:
        """All files of one post (a multi-file post is one turn), fetched in order."""
        attachments = []
        for item in files:
            name = str(item.get("name") or item.get("title") or "file")
            att = Attachment(_kind(item), name, str(item.get("mimetype") or ""))
            att.size = int(item.get("size") or 0)
            attachments.append(att)
            if att.size > self.max_bytes:
                att.error = TOO_LARGE
                continue
            url = str(item.get("url_private_download") or item.get("url_private") or "")
            try:
                await self._fetch(att, url)
            except (aiohttp.ClientError, TimeoutError) as exc:
                att.error = f"Slack could not be reached ({type(exc).__name__})"
            if att.error and att.error != TOO_LARGE:
                log.warning("slack: could not download %s: %s", name, att.error)
        return attachments

    async def _fetch(self, att: Attachment, url: str) -> None:
        host = urlsplit(url).hostname
        if host not in self.allowed_hosts:
            att.error = "the file is not on Slack's file server"
            return
        headers = {"Authorization": f"Bearer {self.token}"}
        async with (
            aiohttp.ClientSession(timeout=TIMEOUT) as http,
            http.get(url, headers=headers, allow_redirects=False) as response,
        ):
            if response.status != 200:
                att.error = f"Slack refused the download (HTTP {response.status})"
                return
            if response.content_type == "text/html" and not att.mime.startswith("text/html"):
                att.error = "Slack refused the download (the bot may not see that file)"
                return
            data = bytearray()
            async for chunk in response.content.iter_chunked(CHUNK):
                data += chunk
                if len(data) > self.max_bytes:  # the size Slack declared was wrong
                    att.size, att.error = len(data), TOO_LARGE
                    return
        att.data, att.size = bytes(data), len(data)


async def upload(client: AsyncWebClient, address: Address, file: OutboundFile) -> str:
    """Share `file` in the address's conversation (and thread); returns the file id."""
    data = await asyncio.to_thread(Path(file.path).read_bytes)
    response = await client.files_upload_v2(
        channel=address.chat_id,
        thread_ts=address.thread_id,
        file=data,
        filename=file.name,
        title=file.name,
        initial_comment=file.caption or None,
    )
    shared = response.get("files") or [{}]
    return str(shared[0].get("id", ""))
