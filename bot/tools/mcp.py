"""MCP servers from `[mcp.servers.<name>]`, through the official `mcp` SDK.

Each server gets a supervisor task that connects (stdio `command`/`args`/`env`, or streamable
HTTP `url`/`headers`), registers its tools as `<server>__<tool>`, checks liveness now and
then, and restarts it with exponential backoff when it fails or crashes. None of this
blocks start-up or a turn: while a server is down its tools stay registered (keeping the
cached prompt prefix stable) and answer with an error the model can read.

Env values, headers and URLs may carry tokens, so they never reach logs or /status.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import time
from collections.abc import Callable, Sequence
from enum import StrEnum
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import (
    CONNECTION_CLOSED,
    AudioContent,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)
from mcp.types import Tool as McpTool
from yarl import URL

from bot.backoff import Backoff
from bot.checks import FAIL, OK, Check
from bot.config import Config, McpConfig, McpServerConfig
from bot.logs import redacted_stderr
from bot.tools.policy import MCP_SEPARATOR
from bot.tools.registry import Tool, ToolContext, ToolError, ToolRegistry
from bot.untrusted import marker_id_for, wrap_untrusted

log = logging.getLogger(__name__)

# The Messages API accepts tool names of 1-64 characters from this set.
TOOL_NAME_MAX = 64
_INVALID_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")
MAX_TOOL_PAGES = 20  # tools/list pages read at most (a server that paginates forever stops)
# A connection that lived this long counts as healthy: the next failure restarts quickly.
STABLE_SECONDS = 60.0
REDACTED = "***"
MIN_SECRET_CHARS = 4  # shorter values would redact ordinary words


class ServerState(StrEnum):
    STARTING = "starting"
    CONNECTED = "connected"
    DOWN = "down"
    STOPPED = "stopped"


def registered_name(server: str, tool: str) -> str:
    """`<server>__<tool>` with characters the API refuses replaced, cut to its length limit."""
    return _INVALID_NAME_CHARS.sub("_", f"{server}{MCP_SEPARATOR}{tool}")[:TOOL_NAME_MAX]


def secret_values(config: McpServerConfig) -> list[str]:
    """Config values that may be credentials: env and header values, URL userinfo and query."""
    values = [*config.env.values(), *config.headers.values()]
    for value in config.headers.values():  # "Bearer abc" -> also hide "abc" on its own
        values.extend(value.split())
    if config.url:
        url = URL(config.url)
        values += [url.user or "", url.password or "", url.query_string]
    return sorted({v for v in values if len(v) >= MIN_SECRET_CHARS}, key=len, reverse=True)


def redact(text: str, secrets: Sequence[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, REDACTED)
    return text


def transport_label(config: McpServerConfig) -> str:
    """How a server is reached, safe to show: the command name, or the URL's origin."""
    if config.command:
        return f"stdio {Path(config.command).name}"
    url = URL(config.url)
    return f"HTTP {url.scheme}://{url.host}:{url.port}"


def describe_error(exc: BaseException) -> str:
    """A one-line reason, looking inside the exception groups anyio raises."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def result_text(result: CallToolResult) -> str:
    """The text of a tool result; media are named, not inlined."""
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, TextContent):
            parts.append(block.text)
        elif isinstance(block, ImageContent | AudioContent):
            parts.append(f"[{block.type} omitted: {block.mime_type}]")
        elif isinstance(block, EmbeddedResource):
            resource = block.resource
            if isinstance(resource, TextResourceContents):
                parts.append(resource.text)
            else:
                parts.append(f"[binary resource omitted: {resource.uri}]")
        elif isinstance(block, ResourceLink):
            parts.append(f"[resource: {block.uri}]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts)


async def connect(
    stack: contextlib.AsyncExitStack, config: McpServerConfig, cwd: Path, name: str
) -> Client:
    """Start or reach the server and finish the MCP handshake; closed with `stack`."""
    if config.command:
        params = StdioServerParameters(
            command=config.command, args=config.args, env=config.env or None, cwd=cwd
        )
        prefix = f"MCP server {name} (stderr): "
        errlog = stack.enter_context(redacted_stderr(log, prefix, secret_values(config)))
        transport = stdio_client(params, errlog=errlog)
    else:
        http = await stack.enter_async_context(
            create_mcp_http_client(headers=config.headers or None)
        )
        transport = streamable_http_client(config.url, http_client=http)
    # No response cache: liveness checks must reach the server.
    return await stack.enter_async_context(Client(transport, cache=None))


async def list_tools(client: Client) -> list[McpTool]:
    tools: list[McpTool] = []
    cursor: str | None = None
    for _ in range(MAX_TOOL_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


class McpServer:
    """One configured server: its supervisor task, connection state and registered tools."""

    def __init__(
        self,
        name: str,
        config: McpServerConfig,
        settings: McpConfig,
        registry: ToolRegistry,
        cwd: Path,
        *,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.name = name
        self.config = config
        self.settings = settings
        self.registry = registry
        self.cwd = cwd
        self.clock = clock
        self.state = ServerState.STOPPED
        self.error = ""
        self.next_retry_at = 0.0
        self.tools: dict[str, Tool] = {}  # registered name -> tool
        self._client: Client | None = None
        self._secrets = secret_values(config)
        self._suspect = asyncio.Event()  # a call saw a broken connection: check now
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.state = ServerState.STARTING
        self._task = asyncio.create_task(self._supervise(), name=f"mcp:{self.name}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for name in self.tools:
            self.registry.unregister(name)
        self.tools.clear()
        self.state = ServerState.STOPPED

    def status(self) -> str:
        if self.state == ServerState.CONNECTED:
            return f"{self.name} up ({len(self.tools)} tools)"
        if self.state == ServerState.DOWN:
            wait = max(0.0, self.next_retry_at - self.clock())
            return f"{self.name} down ({self.error}; retry in {wait:.0f}s)"
        return f"{self.name} {self.state}"

    # --- supervision --------------------------------------------------------------------

    async def _supervise(self) -> None:
        backoff = Backoff(self.settings.retry_initial, self.settings.retry_max)
        while True:
            connected_at, reason = await self._run_once()
            if connected_at is not None and self.clock() - connected_at >= STABLE_SECONDS:
                backoff.reset()
            delay = backoff.next()
            self.state = ServerState.DOWN
            self.error = redact(reason, self._secrets)
            self.next_retry_at = self.clock() + delay
            log.warning(
                "MCP server %s (%s) is down: %s; retrying in %.1fs",
                self.name,
                transport_label(self.config),
                self.error,
                delay,
            )
            await asyncio.sleep(delay)

    async def _run_once(self) -> tuple[float | None, str]:
        """Connect and serve until the connection fails: (when it connected, why it ended)."""
        self.state = ServerState.STARTING
        connected_at: float | None = None
        try:
            async with contextlib.AsyncExitStack() as stack:
                try:
                    async with asyncio.timeout(self.config.start_timeout):
                        client = await connect(stack, self.config, self.cwd, self.name)
                        listed = await list_tools(client)
                except TimeoutError:
                    return None, f"did not start within {self.config.start_timeout:.0f}s"
                self._sync_tools(listed)
                self._client = client
                self._suspect.clear()
                self.state = ServerState.CONNECTED
                self.error = ""
                connected_at = self.clock()
                log.info("MCP server %s is up with %d tool(s)", self.name, len(self.tools))
                return connected_at, await self._watch(client)
        except Exception as exc:  # any failure of a server is reported and retried
            return connected_at, describe_error(exc)
        finally:
            self._client = None

    async def _watch(self, client: Client) -> str:
        """Check liveness (and refresh the tool list) every health_interval, or at once when
        a call saw trouble; returns why the connection is considered lost."""
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.settings.health_interval):
                    await self._suspect.wait()
            self._suspect.clear()
            try:
                async with asyncio.timeout(self.config.start_timeout):
                    listed = await list_tools(client)
            except TimeoutError:
                return "stopped answering"
            except Exception as exc:
                return f"connection lost ({describe_error(exc)})"
            self._sync_tools(listed)

    def _sync_tools(self, listed: Sequence[McpTool]) -> None:
        """Make the registry hold exactly the server's current tools."""
        wanted: dict[str, Tool] = {}
        for remote in listed:
            name = registered_name(self.name, remote.name)
            if name in wanted:
                log.warning("MCP server %s: %r clashes as %s", self.name, remote.name, name)
                continue
            wanted[name] = self._tool(name, remote)
        for name in set(self.tools) - set(wanted):
            self.registry.unregister(name)
            del self.tools[name]
        for name, tool in wanted.items():
            current = self.tools.get(name)
            if current is not None and current.definition() == tool.definition():
                continue
            if current is None and self.registry.get(name) is not None:
                log.warning("MCP server %s: %s is already a tool; skipped", self.name, name)
                continue
            self.registry.unregister(name)
            self.registry.register(tool)
            self.tools[name] = tool

    def _tool(self, name: str, remote: McpTool) -> Tool:
        schema = dict(remote.input_schema or {})
        schema.setdefault("type", "object")
        description = remote.description or remote.title or f"{remote.name} ({self.name} MCP)"

        async def handler(args: dict[str, Any], ctx: ToolContext) -> str:
            return await self._call(remote.name, args, ctx)

        return Tool(
            name=name,
            description=description,
            input_schema=schema,
            handler=handler,
            timeout=self.config.timeout,
            untrusted_source=f"mcp:{self.name}",
        )

    # --- calls --------------------------------------------------------------------------

    async def _call(self, tool: str, args: dict[str, Any], ctx: ToolContext) -> str:
        client = self._client
        if client is None or self.state != ServerState.CONNECTED:
            reason = f": {self.error}" if self.error else ""
            raise ToolError(
                f"MCP server {self.name!r} is not connected ({self.state}{reason}). It is being "
                "restarted in the background; try again later or do without it."
            )
        try:
            result = await client.call_tool(tool, args)
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                self._suspect.set()
            raise ToolError(self._outside_error(exc.message, ctx, tool)) from None
        except Exception as exc:
            self._suspect.set()
            reason = redact(describe_error(exc), self._secrets)
            raise ToolError(f"MCP server {self.name!r} failed during the call: {reason}") from None
        text = result_text(result)
        if result.is_error:
            raise ToolError(self._outside_error(text, ctx, tool))
        return text or "(the tool returned no output)"

    def _outside_error(self, text: str, ctx: ToolContext, tool: str) -> str:
        # Error texts come from the server, so they are wrapped like its results.
        marker = marker_id_for(f"{ctx.turn_id}:{self.name}:{tool}")
        source = f"mcp:{self.name}"
        wrapped = wrap_untrusted(text or "(no details)", source=source, marker_id=marker)
        return f"MCP server {self.name!r} reported an error:\n{wrapped}"


class McpManager:
    """All configured servers: started in the background, stopped together, one /status line."""

    def __init__(self, config: Config, registry: ToolRegistry):
        self.servers = [
            McpServer(name, server, config.mcp, registry, config.base_dir)
            for name, server in config.mcp.servers.items()
        ]

    def start(self) -> None:
        for server in self.servers:
            log.info("starting MCP server %s (%s)", server.name, transport_label(server.config))
            server.start()

    async def stop(self) -> None:
        await asyncio.gather(*(server.stop() for server in self.servers))

    def status_line(self, key: str) -> str | None:
        if not self.servers:
            return None
        return "MCP: " + " · ".join(server.status() for server in self.servers)


async def _probe(name: str, config: McpServerConfig, cwd: Path) -> Check:
    label = transport_label(config)
    try:
        async with contextlib.AsyncExitStack() as stack, asyncio.timeout(config.start_timeout):
            client = await connect(stack, config, cwd, name)
            tools = await list_tools(client)
    except TimeoutError:
        return Check(f"mcp {name}", FAIL, f"{label}: did not start within {config.start_timeout}s")
    except Exception as exc:
        reason = redact(describe_error(exc), secret_values(config))
        return Check(f"mcp {name}", FAIL, f"{label}: could not start: {reason}")
    return Check(f"mcp {name}", OK, f"{label}: started, {len(tools)} tool(s)")


async def check_servers(config: Config) -> list[Check]:
    """`krill doctor`: start each configured server once and list its tools."""
    servers = config.mcp.servers
    if not servers:
        return [Check("mcp", OK, "no servers configured")]
    probes = (_probe(name, server, config.base_dir) for name, server in servers.items())
    return list(await asyncio.gather(*probes))
