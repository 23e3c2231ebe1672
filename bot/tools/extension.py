"""Wires the tools into a running App: the result hook, `read_tool_result`, `web_fetch`,
MCP servers (with their /status line), and the periodic cleanup of kept results."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from bot.tools.mcp import McpManager
from bot.tools.results import ResultProcessor, ResultStore, cleanup_forever
from bot.tools.web_fetch import WebFetcher, WebFetchTool

if TYPE_CHECKING:
    from bot.app import App


async def extension(app: App) -> Callable[[], Awaitable[None]]:
    config = app.config
    processor = ResultProcessor(ResultStore(app.workspace.path, config.tools.results))
    app.tools.result_hook = processor.process
    app.tools.register(processor.read_tool())
    app.tools.register(WebFetchTool(WebFetcher(config.tools.web_fetch)).tool())
    mcp = McpManager(config, app.tools)
    mcp.start()  # connects in the background; never holds up start-up
    app.core.status_lines.append(mcp.status_line)
    cleanup = asyncio.create_task(cleanup_forever(processor.store), name="tool-results-cleanup")

    async def stop() -> None:
        cleanup.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await cleanup
        await mcp.stop()

    return stop
