"""The web search backends Krill queries itself: a self-hosted SearXNG's JSON API and the
Brave Search API. Each turns one query into `SearchHit`s (title, URL, plain-text snippet);
what a server says when it fails is kept apart (`SearchFailed.outside`), to reach the model
only inside untrusted markers.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import Any, Protocol

import aiohttp
from yarl import URL

from bot import __version__
from bot.config import WebSearchConfig
from bot.config.tools import BRAVE_BASE_URL

USER_AGENT = f"Krill/{__version__} (web_search)"
# Results are filtered by domain after the search, so a few more are asked for than kept.
OVERFETCH = 2
BRAVE_MAX_COUNT = 20  # the most results the Brave API returns for one request
SNIPPET_MAX_CHARS = 600
TITLE_MAX_CHARS = 200
OUTSIDE_MAX_CHARS = 300  # of an error body, quoted to the model and the operator
_TAG_RE = re.compile(r"<[^>]{0,200}>")


@dataclass(frozen=True, slots=True)
class SearchHit:
    title: str
    url: str
    snippet: str


class SearchFailed(Exception):
    """A search that gave no results. The message is Krill's own words, saying what to fix;
    `outside` holds what the server answered."""

    def __init__(self, message: str, outside: str = ""):
        super().__init__(message)
        self.outside = outside


class SearchBackend(Protocol):
    name: str

    async def search(self, query: str, count: int) -> list[SearchHit]:
        """Up to `count` hits for `query`, best first; raises SearchFailed."""
        ...


def plain(text: str, limit: int) -> str:
    """Markup-free single-spaced text (backends mark matches with <strong>), cut at `limit`."""
    text = " ".join(html.unescape(_TAG_RE.sub("", text)).split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _normalise(domain: str) -> str:
    domain = domain.strip().lower().removeprefix("*.")
    return domain.split("://", 1)[-1].strip("/")


def host_matches(host: str, domains: list[str]) -> bool:
    """Whether `host` is one of `domains` or a subdomain of one."""
    host = host.lower().rstrip(".")
    return any(host == d or host.endswith("." + d) for d in map(_normalise, domains) if d)


def domain_allowed(url: str, config: WebSearchConfig) -> bool:
    """The domain rules of `tools.web_search`: only http(s) results, from an allowed domain
    when a list is set, never from a blocked one."""
    try:
        parsed = URL(url)
    except ValueError:
        return False
    if parsed.scheme not in ("http", "https") or not parsed.host:
        return False
    if config.allowed_domains and not host_matches(parsed.host, config.allowed_domains):
        return False
    return not host_matches(parsed.host, config.blocked_domains)


def keep(hits: list[SearchHit], config: WebSearchConfig, count: int) -> list[SearchHit]:
    """The first `count` hits the domain rules allow, each URL once."""
    seen: set[str] = set()
    kept = []
    for hit in hits:
        if hit.url in seen or not domain_allowed(hit.url, config):
            continue
        seen.add(hit.url)
        kept.append(hit)
        if len(kept) == count:
            break
    return kept


def _hit(title: Any, url: Any, snippet: Any) -> SearchHit | None:
    if not isinstance(url, str) or not url:
        return None
    return SearchHit(
        plain(str(title or ""), TITLE_MAX_CHARS) or url,
        url,
        plain(str(snippet or ""), SNIPPET_MAX_CHARS),
    )


async def _get_json(
    config: WebSearchConfig, url: URL, headers: dict[str, str], explain: dict[int, str]
) -> Any:
    """GET `url` and decode its JSON; SearchFailed saying what to fix otherwise.

    `explain` maps HTTP statuses to what the operator should do about them."""
    timeout = aiohttp.ClientTimeout(total=config.timeout)
    try:
        async with (
            aiohttp.ClientSession(timeout=timeout, headers={"User-Agent": USER_AGENT}) as http,
            http.get(url, headers=headers) as response,
        ):
            if response.status != 200:
                body = (await response.text(errors="replace"))[:OUTSIDE_MAX_CHARS]
                reason = explain.get(response.status, "the search server refused the request")
                raise SearchFailed(
                    f"{reason} (HTTP {response.status})",
                    f"HTTP {response.status} {response.reason or ''}\n{body}",
                )
            try:
                return await response.json(content_type=None)
            except ValueError:
                raise SearchFailed("the search server did not answer with JSON") from None
    except TimeoutError:
        raise SearchFailed(
            f"the search server did not answer within {config.timeout:.0f}s"
        ) from None
    except aiohttp.ClientError as exc:
        raise SearchFailed(
            f"cannot reach the search server at {url.origin()}", f"{type(exc).__name__}: {exc}"
        ) from None


class SearxngBackend:
    """SearXNG's `/search?format=json` (its settings.yml must list `json` under
    `search.formats`, or it answers 403)."""

    name = "searxng"

    def __init__(self, config: WebSearchConfig):
        self.config = config

    async def search(self, query: str, count: int) -> list[SearchHit]:
        url = URL(self.config.base_url.rstrip("/") + "/search").with_query(
            q=query, format="json", safesearch="1"
        )
        explain = {
            403: "SearXNG refused JSON: add `json` to search.formats in its settings.yml",
            429: "SearXNG's rate limiter refused the request (its limiter settings)",
        }
        data = await _get_json(self.config, url, {"Accept": "application/json"}, explain)
        results = data.get("results") if isinstance(data, dict) else None
        if not isinstance(results, list):
            raise SearchFailed("SearXNG's answer has no result list")
        hits = [
            hit
            for r in results
            if isinstance(r, dict) and (hit := _hit(r.get("title"), r.get("url"), r.get("content")))
        ]
        return keep(hits, self.config, count)


class BraveBackend:
    """The Brave Search API's web search (`X-Subscription-Token`)."""

    name = "brave"

    def __init__(self, config: WebSearchConfig):
        self.config = config

    async def search(self, query: str, count: int) -> list[SearchHit]:
        base = (self.config.base_url or BRAVE_BASE_URL).rstrip("/")
        wanted = min(BRAVE_MAX_COUNT, count * OVERFETCH)
        url = URL(base + "/web/search").with_query(q=query, count=str(wanted))
        headers = {"Accept": "application/json", "X-Subscription-Token": self.config.api_key}
        explain = {
            401: "Brave refused the API key: check tools.web_search.api_key (or BRAVE_API_KEY)",
            403: "Brave refused the API key for this request: check the key's plan",
            422: "Brave refused the request's parameters",
            429: "Brave's rate limit or monthly quota for this key is used up",
        }
        data = await _get_json(self.config, url, headers, explain)
        web = data.get("web") if isinstance(data, dict) else None
        results = web.get("results") if isinstance(web, dict) else []
        hits = [
            hit
            for r in results or []
            if isinstance(r, dict)
            and (hit := _hit(r.get("title"), r.get("url"), r.get("description")))
        ]
        return keep(hits, self.config, count)


def backend_for(config: WebSearchConfig) -> SearchBackend | None:
    """The backend Krill queries itself, or None for the provider's server-side search."""
    if config.backend == "searxng":
        return SearxngBackend(config)
    if config.backend == "brave":
        return BraveBackend(config)
    return None
