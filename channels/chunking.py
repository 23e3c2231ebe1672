"""Packing a reply into message-sized chunks, shared by the platforms: each passes its own
measure of what fits (characters for Slack, rendered UTF-16 units for Telegram).

A cut inside a paragraph never leaves half a style behind: bold or struck-through text that
runs across it is closed at the end of one piece and reopened at the start of the next, so
both halves still render styled instead of showing stray `**`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator

Fits = Callable[[str], bool]

# Paired inline style markers, longest first so "**" is not read as two "*".
_STYLE_MARKERS = ("**", "__", "~~")
_CODE_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_CODE_SPAN = re.compile(r"(`+).*?\1")
_LEADING_BLOCK_MARK = re.compile(r"^(\s*(?:[-*+]\s+|\d+[.)]\s+|#{1,6}\s+|>\s*)*)")


def pack(pieces: Iterable[str], separator: str, fits: Fits) -> list[str]:
    """Join `pieces` with `separator`, greedily, into chunks that each fit.

    A piece that does not fit on its own becomes a chunk by itself: callers split such
    pieces first (e.g. with `hard_split`).
    """
    chunks: list[str] = []
    current = ""
    for piece in pieces:
        candidate = f"{current}{separator}{piece}" if current else piece
        if fits(candidate):
            current = candidate
            continue
        if current:
            chunks.append(current)
        current = piece
    if current:
        chunks.append(current)
    return chunks


def hard_split(line: str, fits: Fits) -> Iterator[str]:
    """Cut one overlong line into pieces that fit, preferring to cut at whitespace.

    `fits` must be monotonic in the length of a prefix (a prefix of what fits fits too).
    """
    rest = line
    while rest:
        if fits(rest):
            yield rest
            return
        # Largest prefix that fits, by bisection.
        low, high = 1, len(rest)
        while low < high:
            mid = (low + high + 1) // 2
            if fits(rest[:mid]):
                low = mid
            else:
                high = mid - 1
        cut = low
        space = _break_at(rest, cut)
        if space > cut // 2:
            cut = space + 1
        yield rest[:cut].rstrip()
        rest = rest[cut:].lstrip()


def _break_at(text: str, cut: int) -> int:
    """The last space before `cut`, preferring one outside parentheses (-1 if none).

    A space inside parentheses counts only when none outside is in the second half, so an
    aside like "(see the notes below)" stays in one chunk when it can.
    """
    depth = 0
    outside = inside = -1
    for index, char in enumerate(text[:cut]):
        if char in "([":
            depth += 1
        elif char in ")]":
            depth = max(depth - 1, 0)
        elif char == " ":
            if depth == 0:
                outside = index
            else:
                inside = index
    return outside if outside > cut // 2 else max(outside, inside)


def open_styles(markdown: str) -> list[str]:
    """Style markers still open at the end of `markdown`, innermost last.

    Only the last paragraph counts (styles never cross a blank line or a code block), and
    code, in fences or backticks, and backslash-escaped characters are skipped.
    """
    opened: list[str] = []
    fence: str | None = None
    for line in markdown.split("\n"):
        marker = _CODE_FENCE.match(line)
        if fence is not None or marker is not None:
            if marker is not None:
                fence = None if fence is not None else marker.group(1)
            opened.clear()
            continue
        if not line.strip():
            opened.clear()
            continue
        text = _CODE_SPAN.sub("", line)
        i = 0
        while i < len(text):
            if text[i] == "\\":
                i += 2
                continue
            style = next((m for m in _STYLE_MARKERS if text.startswith(m, i)), None)
            if style is None:
                i += 1
                continue
            if style in opened:
                del opened[opened.index(style) :]
            else:
                opened.append(style)
            i += len(style)
    return opened


def carry_styles(pieces: list[str]) -> list[str]:
    """Close the styles each piece of one cut paragraph leaves open, and reopen them at the
    start of the next piece."""
    out: list[str] = []
    carried = ""
    for chunk in pieces:
        if carried and not _CODE_FENCE.match(chunk):
            # After any list, heading or quote marker, so the line keeps its meaning.
            lead = _LEADING_BLOCK_MARK.match(chunk)
            head = lead.group(1) if lead else ""
            chunk = f"{head}{carried}{chunk[len(head) :]}"
        opened = open_styles(chunk)
        carried = "".join(opened)
        out.append(chunk.rstrip() + "".join(reversed(opened)) if opened else chunk)
    return out
