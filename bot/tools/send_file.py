"""Tool `send_file(path, caption)`: send a workspace file (or a stored tool result, which
lives in the workspace) into the conversation the turn answers. Images go as photos where
the platform has them. Which files a session may send is what it may read (the
`WorkspaceGate`: paths outside the workspace, symlinks included, other conversations'
memory and kept results are refused). The file goes through the outbox like a reply
(retried, in order, never sent twice)."""

from __future__ import annotations

import asyncio
import hashlib
import mimetypes
from collections.abc import Mapping
from typing import Any, Protocol

from bot.channel_contract import FileChannel
from bot.tools.registry import Tool, ToolContext, ToolError, ToolRegistry, WorkspaceGate
from bot.types import Address, OutboundFile
from bot.untrusted import clean_name

NAME = "send_file"
# Uploads Telegram and Slack both take; larger files are refused before any upload.
MAX_BYTES = 50 * 1024 * 1024
DESCRIPTION = (
    "Send a file to the person in this conversation: a file in your workspace (relative "
    "path) or a stored tool result. Images are shown as photos. Use it only when the person "
    "wants the file itself, not to show text you could write in your reply."
)
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "Path relative to the workspace."},
        "caption": {"type": "string", "description": "Short text shown with the file."},
    },
    "required": ["path"],
}


class FileOutbox(Protocol):
    async def put_file(self, address: Address, file: OutboundFile) -> None: ...


class SendFileTool:
    def __init__(
        self, channels: Mapping[str, object], outbox: FileOutbox, gate: WorkspaceGate
    ) -> None:
        self.channels = channels
        self.outbox = outbox
        self.gate = gate

    def register(self, registry: ToolRegistry) -> None:
        registry.register(Tool(NAME, DESCRIPTION, SCHEMA, self.run, timeout=120.0))

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        address = ctx.address
        if address is None:
            raise ToolError("this turn has no conversation to send a file to")
        channel = self.channels.get(address.channel)
        if not isinstance(channel, FileChannel):
            raise ToolError(f"files cannot be sent on {address.channel}")
        path = self.gate(ctx, str(args.get("path") or ""))
        name = clean_name(path.name)
        size = path.stat().st_size
        if size > MAX_BYTES:  # checked before reading, so a huge file is never loaded
            raise ToolError(f"{name}: {size:,} bytes is over the {MAX_BYTES:,} limit")
        data = await asyncio.to_thread(path.read_bytes)
        caption = str(args.get("caption") or "")[:1000]
        # The same file and caption in one turn is one row: a call repeated by the model or
        # run again when the turn resumes after a restart is not sent twice.
        digest = hashlib.sha256(data + caption.encode()).hexdigest()[:24]
        key = f"{ctx.turn_id}:file:{digest}"
        mime = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        file = OutboundFile(str(path), path.name, mime, caption, ctx.turn_id, key)
        await self.outbox.put_file(address, file)
        return (
            f"{name} ({len(data):,} bytes) is on its way to the conversation; it arrives "
            "before your reply."
        )
