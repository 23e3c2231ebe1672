"""A reply's sources as a Markdown line of links, for the channels that show them after the
reply's text (Telegram, the web chat, the terminal). Titles come from web pages, so nothing
in them can turn into formatting or break the link."""

from __future__ import annotations

import re
from collections.abc import Sequence

from bot.types import Source

LABEL = "Sources:"
SEPARATOR = " · "
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+!|~])")
# Characters that would end a Markdown link destination early, percent-encoded.
_URL_ESCAPES = {" ": "%20", "(": "%28", ")": "%29", "<": "%3C", ">": "%3E"}


def link(source: Source) -> str:
    title = _MARKDOWN_SPECIAL.sub(r"\\\1", " ".join(source.title.split()))
    url = "".join(_URL_ESCAPES.get(ch, ch) for ch in source.url)
    return f"[{title}]({url})"


def sources_line(sources: Sequence[Source]) -> str:
    """`Sources: [title](url) · …`, or "" for none."""
    if not sources:
        return ""
    return f"{LABEL} " + SEPARATOR.join(link(s) for s in sources)


def with_sources(markdown: str, sources: Sequence[Source]) -> str:
    """`markdown` with its sources' line after a blank line."""
    line = sources_line(sources)
    return f"{markdown}\n\n{line}" if line else markdown
