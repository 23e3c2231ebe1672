"""Tool `web_search(query, max_results)`: find pages on the web.

`tools.web_search.backend` picks who searches. "anthropic" is the Messages API's server-side
search: the request carries its definition (`max_uses`, domain lists, user location), the
provider runs the searches and the reply holds their result blocks and citations. "searxng"
and "brave" are queried by Krill: each result goes back to the model as a `search_result`
block (so it can cite it like a server-side result) whose text — title, URL and snippet —
is wrapped as untrusted content. Either way the model can read a page with `web_fetch`.
"""

from __future__ import annotations

import logging
from typing import Any

from anthropic.types import SearchResultBlockParam, UserLocationParam, WebSearchTool20250305Param
from anthropic.types.tool_result_block_param import Content as ResultContent
from yarl import URL

from bot.checks import FAIL, OK, Check
from bot.config import WebSearchConfig
from bot.tools.registry import Tool, ToolContext, ToolError, positive_int_arg
from bot.tools.search_backends import SearchBackend, SearchFailed, SearchHit, backend_for
from bot.tools.web_fetch import with_outside
from bot.untrusted import marker_id_for, wrap_untrusted

log = logging.getLogger(__name__)

NAME = "web_search"
QUERY_MAX_CHARS = 400
DESCRIPTION = (
    "Search the web. Use it for anything recent or that you are not sure of (news, releases, "
    "prices, whether a service is down), then answer from the results and cite them. Each "
    "result has a title, URL and snippet; read a page in full with web_fetch."
)
SCHEMA_NOTE = "What to search for, as you would type it into a search engine."


def server_definition(config: WebSearchConfig) -> WebSearchTool20250305Param:
    """The Messages API's server-side search tool, as `tools.web_search` configures it."""
    definition: WebSearchTool20250305Param = {
        "type": "web_search_20250305",
        "name": "web_search",
        "max_uses": config.max_uses,
    }
    if config.allowed_domains:
        definition["allowed_domains"] = list(config.allowed_domains)
    if config.blocked_domains:
        definition["blocked_domains"] = list(config.blocked_domains)
    where = config.user_location
    location: UserLocationParam = {"type": "approximate"}
    for key in ("city", "region", "country", "timezone"):
        if value := getattr(where, key):
            location[key] = value
    if len(location) > 1:
        definition["user_location"] = location
    return definition


def result_blocks(hits: list[SearchHit], ctx: ToolContext, query: str) -> list[ResultContent]:
    """One citable `search_result` block per hit; everything the web wrote (title, URL,
    snippet) sits inside untrusted markers. The block's title is the URL's host, so no
    outside words stand outside the markers but the URL itself."""
    blocks: list[ResultContent] = []
    for index, hit in enumerate(hits):
        marker = marker_id_for(f"{ctx.turn_id}:{NAME}:{query}:{index}")
        text = f"Title: {hit.title}\nURL: {hit.url}\n\n{hit.snippet or '(no snippet)'}"
        block: SearchResultBlockParam = {
            "type": "search_result",
            "source": hit.url,
            "title": URL(hit.url).host or hit.url,
            "content": [
                {"type": "text", "text": wrap_untrusted(text, source=NAME, marker_id=marker)}
            ],
            "citations": {"enabled": True},
        }
        blocks.append(block)
    return blocks


class WebSearchTool:
    """`web_search` over a backend Krill queries itself (searxng, brave)."""

    def __init__(self, config: WebSearchConfig, backend: SearchBackend):
        self.config = config
        self.backend = backend

    async def handle(self, args: dict[str, Any], ctx: ToolContext) -> str | list[ResultContent]:
        query = args.get("query")
        if not isinstance(query, str) or not query.strip():
            raise ToolError("query is required")
        query = " ".join(query.split())[:QUERY_MAX_CHARS]
        count = min(
            positive_int_arg(args, "max_results", self.config.max_results), self.config.max_results
        )
        try:
            hits = await self.backend.search(query, count)
        except SearchFailed as exc:
            log.warning("web_search (%s) failed: %s", self.backend.name, exc)
            text = f"the search failed: {exc}."
            raise ToolError(with_outside(text, exc.outside, query, ctx, source=NAME)) from None
        if not hits:
            return f'No results for "{query}". Try other words, or fewer of them.'
        intro = (
            f'{len(hits)} results for "{query}", best first. Cite the ones you use; read a '
            "page in full with web_fetch."
        )
        return [{"type": "text", "text": intro}, *result_blocks(hits, ctx, query)]

    def tool(self) -> Tool:
        return Tool(
            name=NAME,
            description=DESCRIPTION,
            input_schema={
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": SCHEMA_NOTE},
                    "max_results": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": self.config.max_results,
                        "description": "Return at most this many results.",
                    },
                },
                "required": ["query"],
            },
            handler=self.handle,
            timeout=self.config.timeout + 5.0,
        )


async def _runs_at_provider(args: dict[str, Any], ctx: ToolContext) -> str:
    raise ToolError("web_search runs on the model provider's side; it cannot be called here")


def web_search_tool(config: WebSearchConfig) -> Tool | None:
    """The `web_search` tool `config` asks for; None while it is off."""
    if not config.enabled:
        return None
    backend = backend_for(config)
    if backend is None:
        return Tool(NAME, DESCRIPTION, {}, _runs_at_provider, server=server_definition(config))
    return WebSearchTool(config, backend).tool()


async def check_backend(config: WebSearchConfig, backend: SearchBackend) -> Check:
    """`krill doctor`: one real search through a backend Krill queries itself."""
    try:
        hits = await backend.search("krill", 1)
    except SearchFailed as exc:
        where = "tools.web_search.base_url" if config.backend == "searxng" else "its API key"
        said = f" ({exc.outside.splitlines()[0]})" if exc.outside else ""
        return Check("web_search", FAIL, f"{config.backend}: {exc}{said}; check {where}")
    return Check(
        "web_search", OK, f"{config.backend} answered a test search ({len(hits)} result(s))"
    )
