"""Configuration of the tools: the global allow/deny lists, `web_fetch`, stored large results
and MCP servers.
"""

from __future__ import annotations

import re

from pydantic import Field, field_validator, model_validator

from bot.config.sections import Section


class WebFetchConfig(Section):
    allow_private: bool = False
    max_chars: int = Field(50_000, gt=0)
    timeout: float = Field(20.0, gt=0)  # seconds for the whole fetch, redirects included
    max_bytes: int = Field(2_000_000, gt=0)  # response bodies are read up to this size
    max_redirects: int = Field(5, ge=0)


class ToolResultsConfig(Section):
    """Large tool results are kept whole on disk; the model gets a preview and an id.

    The defaults are measured (bench/cost.py): most of a long result is never read again,
    so keeping it out of the context costs less than the page-backs it takes to read it.
    They do not depend on the window: a token carried costs the same in any window, and
    the 30% cap (`context.tool_result_max_share`) already keeps one result within it."""

    threshold_bytes: int = Field(16_000, ge=4_000)
    preview_lines: int = Field(200, ge=1)
    # The preview shows at most this much (whole lines); read_tool_result pages are larger.
    preview_bytes: int = Field(1_200, ge=200)
    keep_days: int = Field(7, ge=1)


class ToolsConfig(Section):
    allow: list[str] = Field(default_factory=lambda: ["*"])
    deny: list[str] = Field(default_factory=list)
    admin_only: list[str] = Field(default_factory=list)  # only in turns where every sender is admin
    # Only in direct chats. send_file posts into the conversation, which in a group everyone
    # sees: it needs an operator's choice there (remove it from this list).
    dm_only: list[str] = Field(default_factory=lambda: ["send_file"])
    web_fetch: WebFetchConfig = Field(default_factory=WebFetchConfig)
    results: ToolResultsConfig = Field(default_factory=ToolResultsConfig)


class McpServerConfig(Section):
    command: str = ""
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    url: str = ""
    headers: dict[str, str] = Field(default_factory=dict)
    timeout: float = Field(60.0, gt=0)  # seconds per tool call
    start_timeout: float = Field(30.0, gt=0)  # seconds to connect and list tools

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if bool(self.command) == bool(self.url):
            raise ValueError("set either command (stdio) or url (streamable HTTP)")
        return self


# Server names prefix tool names as `<server>__<tool>`, so they cannot contain "__" themselves.
MCP_SERVER_NAME_RE = re.compile(r"[A-Za-z0-9-]+(?:_[A-Za-z0-9-]+)*")
MCP_SERVER_NAME_MAX = 32


class McpConfig(Section):
    servers: dict[str, McpServerConfig] = Field(default_factory=dict)
    retry_initial: float = Field(2.0, gt=0)  # seconds before the first restart of a failed server
    retry_max: float = Field(300.0, gt=0)  # the restart delay doubles up to this
    health_interval: float = Field(30.0, gt=0)  # seconds between liveness checks (tools/list)

    @field_validator("servers")
    @classmethod
    def _server_names(cls, servers: dict[str, McpServerConfig]) -> dict[str, McpServerConfig]:
        for name in servers:
            if len(name) > MCP_SERVER_NAME_MAX or not MCP_SERVER_NAME_RE.fullmatch(name):
                raise ValueError(
                    f"server name {name!r}: use letters, digits, '-' and single '_' "
                    f"(at most {MCP_SERVER_NAME_MAX} characters)"
                )
        return servers
