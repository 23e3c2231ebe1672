"""The sources of a reply: the web pages its text cited, from the citations the model
attached to its text blocks (server-side web search results, and the `search_result` blocks
Krill's own search backends return). Pure functions over the reply's content blocks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from bot.types import Source

# Sources shown with one reply; Slack's context block takes at most ten elements.
MAX_SOURCES = 8
TITLE_MAX_CHARS = 120


def _source(citation: Mapping[str, Any]) -> Source | None:
    kind = citation.get("type")
    if kind == "web_search_result_location":
        url = citation.get("url")
    elif kind == "search_result_location":
        url = citation.get("source")
    else:
        return None
    if not isinstance(url, str) or not url.startswith(("https://", "http://")):
        return None
    title = " ".join(str(citation.get("title") or "").split()) or url
    if len(title) > TITLE_MAX_CHARS:
        title = title[: TITLE_MAX_CHARS - 1].rstrip() + "…"
    return Source(title, url)


def cited_sources(blocks: Iterable[Mapping[str, Any]]) -> list[Source]:
    """Each page the text blocks cite, in the order first cited."""
    found = []
    for block in blocks:
        if block.get("type") != "text":
            continue
        for citation in block.get("citations") or ():
            if isinstance(citation, Mapping) and (source := _source(citation)) is not None:
                found.append(source)
    return found


def reply_sources(sources: Iterable[Source]) -> tuple[Source, ...]:
    """The sources one reply shows: each URL once, the first `MAX_SOURCES`."""
    seen: set[str] = set()
    kept: list[Source] = []
    for source in sources:
        if source.url not in seen:
            seen.add(source.url)
            kept.append(source)
    return tuple(kept[:MAX_SOURCES])
