"""Packing a reply into message-sized chunks, shared by the platforms: each passes its own
measure of what fits (characters for Slack, rendered UTF-16 units for Telegram)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

Fits = Callable[[str], bool]


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
        space = rest.rfind(" ", 0, cut)
        if space > cut // 2:
            cut = space + 1
        yield rest[:cut].rstrip()
        rest = rest[cut:].lstrip()
