"""Configuration of the tools: the global allow/deny lists, `web_fetch`, `web_search`, stored
large results and MCP servers.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from bot.config.sections import Section


class WebFetchConfig(Section):
    allow_private: bool = False
    max_chars: int = Field(50_000, gt=0)
    timeout: float = Field(20.0, gt=0)  # seconds for the whole fetch, redirects included
    max_bytes: int = Field(2_000_000, gt=0)  # response bodies are read up to this size
    max_redirects: int = Field(5, ge=0)


class UserLocationConfig(Section):
    """Roughly where the bot's people are, for more relevant results (the Anthropic backend
    passes it to the search; empty fields are left out)."""

    city: str = ""
    region: str = ""
    country: str = ""  # two-letter ISO code, e.g. "DE"
    timezone: str = ""  # IANA name, e.g. "Europe/Berlin"


BRAVE_BASE_URL = "https://api.search.brave.com/res/v1"


class WebSearchConfig(Section):
    """`web_search`: off until an operator picks a backend and turns it on."""

    enabled: bool = False
    # anthropic: the Messages API's server-side search (billed per search by Anthropic);
    # searxng: a self-hosted SearXNG's JSON API at base_url; brave: the Brave Search API.
    backend: Literal["anthropic", "searxng", "brave"] = "anthropic"
    base_url: str = ""  # searxng: required; brave: BRAVE_BASE_URL when empty
    api_key: str = ""  # brave: the subscription token (or BRAVE_API_KEY)
    max_uses: int = Field(5, ge=1)  # anthropic: searches the model may run per request
    max_results: int = Field(5, ge=1, le=20)  # searxng, brave: results a call returns at most
    allowed_domains: list[str] = Field(default_factory=list)  # only results from these
    blocked_domains: list[str] = Field(default_factory=list)  # never results from these
    user_location: UserLocationConfig = Field(default_factory=UserLocationConfig)
    timeout: float = Field(15.0, gt=0)  # seconds per searxng or brave request

    @model_validator(mode="after")
    def _one_domain_list(self) -> WebSearchConfig:
        if self.allowed_domains and self.blocked_domains:
            raise ValueError("set allowed_domains or blocked_domains, not both")
        return self


class ToolResultsConfig(Section):
    """Large tool results are kept whole on disk; the model gets a preview and an id.

    The defaults are measured (bench/cost.py): most of a long result is never read again,
    so keeping it out of the context costs less than the page-backs it takes to read it.
    They do not depend on the window: a token carried costs the same in any window, and
    the 30% cap (`context.tool_result_max_share`) already keeps one result within it."""

    threshold_bytes: int = Field(12_000, ge=4_000)
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
    web_search: WebSearchConfig = Field(default_factory=WebSearchConfig)
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
