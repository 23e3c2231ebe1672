"""Cutting a reply into message-sized chunks, shared by the platforms: each passes its own
measure of what fits (characters for Slack, rendered UTF-16 units for Telegram).

A paragraph too long for one message is cut at a line break, else at a space, else
anywhere, and not inside inline code or a short aside in brackets ("(see the notes below)")
when the stretch can go whole to the next piece, or stay whole in this one, with this one
still at least half full. A style (bold, italic, strikethrough) that runs across a cut, as a
CommonMark parser reads the whole paragraph, is closed at the end of one piece and reopened
at the start of the next, so both pieces render it styled instead of showing stray `**`.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import pyromark

Fits = Callable[[str], bool]

# An aside in brackets up to this many characters is not cut when it can move whole.
MAX_ASIDE_CHARS = 200
# The first try when looking for the longest piece that fits, in characters (doubled).
_FIRST_PROBE = 1024
_PAIRS = {"(": ")", "[": "]"}
_MARKERS = "*_~"
_LEADING_BLOCK_MARK = re.compile(r"^(\s*(?:[-*+]\s+|\d+[.)]\s+|#{1,6}\s+|>\s*)*)")
_STYLES = frozenset({"Strong", "Emphasis", "Strikethrough"})
# `**`, `__` or `~~` alone on a paragraph's first or last line: the writer meant it to open
# or close the text beside it, which CommonMark would not do across the line break.
_LONE_OPENER = re.compile(r"\A[ \t]*(\*\*|__|~~)[ \t]*\n(?=\S)")
_LONE_CLOSER = re.compile(r"(?<=\S)[ \t]*\n[ \t]*(\*\*|__|~~)[ \t]*\Z")


def pack(pieces: Iterable[str], separator: str, fits: Fits) -> list[str]:
    """Join `pieces` with `separator`, greedily, into chunks that each fit.

    A piece that does not fit on its own becomes a chunk by itself: callers split such
    pieces first (e.g. with `split_paragraph`).
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


@dataclass(frozen=True, slots=True)
class _Style:
    start: int  # character offsets of the whole span, markers included
    end: int
    marker: str  # as written: "**", "__", "*", "_", "~~" or "~"


def _asides(text: str) -> list[tuple[int, int]]:
    """(start, end) of every balanced (…) or […] of at most MAX_ASIDE_CHARS."""
    found: list[tuple[int, int]] = []
    opened: list[tuple[str, int]] = []
    for index, char in enumerate(text):
        if char in _PAIRS:
            opened.append((char, index))
        elif opened and char == _PAIRS[opened[-1][0]]:
            start = opened.pop()[1]
            if index + 1 - start <= MAX_ASIDE_CHARS:
                found.append((start, index + 1))
    return found


def _inline(markdown: str) -> tuple[list[_Style], list[tuple[int, int]]]:
    """The style spans of `markdown`, outermost first, and its inline code spans, as the
    parser reads them, in character offsets."""
    ends = list(itertools.accumulate(len(char.encode()) for char in markdown))

    def char_at(byte: int) -> int:
        return bisect.bisect_right(ends, byte)

    styles: list[_Style] = []
    code: list[tuple[int, int]] = []
    options = pyromark.Options.ENABLE_STRIKETHROUGH
    for event, span in pyromark.events_with_range(markdown, options=options):
        if not isinstance(event, dict):
            continue
        start, end = char_at(span["start"]), char_at(span["end"])
        if "Start" in event and isinstance(event["Start"], str) and event["Start"] in _STYLES:
            marker = markdown[start : start + 2]
            if event["Start"] == "Emphasis" or marker[1:] != marker[:1]:
                marker = marker[:1]
            styles.append(_Style(start, end, marker))
        elif "Code" in event:
            code.append((start, end))
    return styles, code


def _break(
    text: str, start: int, cut: int, whole: list[tuple[int, int]], prefer_lines: bool
) -> int:
    """Where to end the piece that starts at `start` and fits up to `cut` (< len(text)):
    at the last line break (`prefer_lines`), else at the last space in its second half,
    else at `cut`. A break inside a stretch to keep whole (inline code, a short aside)
    moves before it, or else after it, as long as the piece stays at least half full."""
    half = start + (cut - start) // 2
    end = text.rfind("\n", start + 1, cut + 1) if prefer_lines else -1
    if end <= start:
        end = _last_space(text, half + 1, cut)
    if end <= start:
        end = cut
        # A hard cut: not next to a style marker, which would then be read as text.
        while end - 1 > start and (text[end] in _MARKERS or text[end - 1] in _MARKERS):
            end -= 1
    for begin, finish in sorted(whole):  # outermost first: nested asides move together
        if begin < end < finish:
            if begin > half:
                return begin
            after = _last_space(text, finish, cut)
            if after >= finish:
                return after
    return end


def _last_space(text: str, low: int, high: int) -> int:
    """The last space, tab or line break in text[low:high + 1]; -1 when there is none."""
    return max(text.rfind(blank, low, high + 1) for blank in " \t\n")


def _cuts(
    text: str, fits: Callable[[int, int], bool], whole: list[tuple[int, int]], lines: bool
) -> list[tuple[int, int]]:
    """(start, end) of each piece of `text`, in order; `fits(start, end)` says whether a
    piece fits, and must be monotonic in `end`."""
    pieces: list[tuple[int, int]] = []
    start = 0
    while start < len(text):
        if fits(start, len(text)):
            pieces.append((start, len(text)))
            break
        # The longest piece that fits: probe by doubling, then bisect.
        low, high = start + 1, len(text)
        probe = start + _FIRST_PROBE
        while probe < high and fits(start, probe):
            low, probe = probe, start + 2 * (probe - start)
        high = min(high, probe)
        while low < high:
            middle = (low + high + 1) // 2
            if fits(start, middle):
                low = middle
            else:
                high = middle - 1
        end = _break(text, start, low, whole, lines)
        pieces.append((start, len(text[:end].rstrip())))
        start = end
        while start < len(text) and text[start].isspace():
            start += 1
    return [(begin, end) for begin, end in pieces if end > begin]


def hard_split(line: str, fits: Fits) -> Iterator[str]:
    """Cut one overlong line (code, say) into pieces that fit, preferring to cut at
    whitespace outside short asides. `fits` must be monotonic in a prefix's length."""
    cuts = _cuts(line, lambda start, end: fits(line[start:end]), _asides(line), lines=False)
    for start, end in cuts:
        yield line[start:end]


def attach_lone_markers(paragraph: str) -> str:
    """`**`, `__` or `~~` alone on a paragraph's first or last line joined to the text beside
    it, where that makes it style the paragraph, as the writer meant (CommonMark would show
    the markers as typed)."""
    opened = _LONE_OPENER.sub(r"\1", paragraph)
    for joined in (_LONE_CLOSER.sub(r"\1", opened), opened, _LONE_CLOSER.sub(r"\1", paragraph)):
        styles = _inline(joined)[0] if joined != paragraph else []
        if any(s.start == 0 or s.end == len(joined) for s in styles):
            return joined
    return paragraph


def split_paragraph(paragraph: str, fits: Fits) -> list[str]:
    """Pieces of one paragraph (no code fences) that each fit, cut as the module describes,
    every style that runs across a cut closed and reopened there."""
    styles, code = _inline(paragraph)

    def piece(start: int, end: int) -> str:
        text = paragraph[start:end]
        reopened = "".join(s.marker for s in styles if s.start < start < s.end)
        if reopened:
            head = _LEADING_BLOCK_MARK.match(text)
            lead = head.group(1) if head else ""
            text = f"{lead}{reopened}{text[len(lead) :]}"
        closed = [s.marker for s in styles if s.start < end < s.end]
        return text + "".join(reversed(closed))

    cuts = _cuts(paragraph, lambda s, e: fits(piece(s, e)), [*code, *_asides(paragraph)], True)
    return [piece(start, end) for start, end in cuts]
