"""Markdown replies for Telegram: conversion to plain text plus entities, and splitting a long
reply into chunks that each fit one message.

Pure functions. A chunk stays Markdown (the ledger and transcript keep what the model wrote);
`to_telegram` turns one chunk into the text and entities that are sent with no parse_mode,
so nothing ever needs escaping. File names such as `README.md` are set as code there, because
Telegram's apps would otherwise show them as links to a web site (.md and .sh are domains).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import pyromark
from telegram import MessageEntity
from telegram.constants import MessageLimit
from telegramify_markdown.converter import STANDARD_OPTIONS, convert
from telegramify_markdown.entity import MessageEntity as ConvertedEntity
from telegramify_markdown.entity import utf16_len

from bot.types import Source
from channels.chunking import attach_lone_markers, hard_split, pack, split_paragraph
from channels.sources import with_sources

# Telegram counts the limit after entity parsing, in UTF-16 code units.
MAX_MESSAGE_UNITS: int = MessageLimit.MAX_TEXT_LENGTH

# Where an HTML tag, comment or processing instruction may start.
_TAG_START = re.compile(rb"<(?=[A-Za-z/!?])")
# An opening or closing code fence: up to 3 spaces, then ``` or ~~~ (or longer).
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
# A file name or path with a common extension, standing alone (not part of a URL, an e-mail
# address or a longer word): "README.md", "scripts/backup.sh", but not "x.com/README.md".
_FILE_EXTENSIONS = (
    "md|sh|bash|zsh|py|rs|go|rb|pl|php|js|mjs|ts|tsx|jsx|json|yaml|yml|toml|ini|cfg|conf|env|"
    "txt|log|csv|sql|db|html|css|xml|lock|zip|tar|gz|tgz|pdf|png|jpe?g|gif|svg|mp3|mp4|mov|"
    "exe|so|dll|c|h|cc|cpp|hpp|java|kt|swift|lua|ps1|bat"
)
_FILE_NAME = re.compile(
    rf"(?<![\w.:/@~-])[\w-][\w.~/-]*\.(?:{_FILE_EXTENSIONS})(?![\w/@-]|\.\w)", re.IGNORECASE
)


def literal_html(markdown: str) -> str:
    """Backslash-escape raw HTML so it shows as typed.

    The converter drops HTML, so without this a model's `Vec<String>` written outside
    backticks, or a `<details>` it mentions, would silently vanish from the reply. Only what
    the Markdown parser itself reads as HTML is touched; code spans and blocks never are.
    """
    if "<" not in markdown:
        return markdown
    data = markdown.encode()
    cuts: set[int] = set()
    for payload, span in pyromark.events_with_range(markdown, options=STANDARD_OPTIONS):
        if not isinstance(payload, dict):
            continue
        if "InlineHtml" in payload:
            cuts.add(span["start"])
        elif "Html" in payload:  # one line of an HTML block: every tag in it
            cuts.update(m.start() for m in _TAG_START.finditer(data, span["start"], span["end"]))
    if not cuts:
        return markdown
    out = bytearray()
    last = 0
    for cut in sorted(cuts):
        out += data[last:cut] + b"\\"
        last = cut
    out += data[last:]
    return out.decode()


def _convert(markdown: str) -> tuple[str, list[ConvertedEntity]]:
    return convert(literal_html(markdown))


def rendered_units(markdown: str) -> int:
    """Length of `markdown` as Telegram will count it once converted."""
    return utf16_len(_convert(markdown)[0])


def with_fitting_sources(
    markdown: str, sources: Sequence[Source], limit: int = MAX_MESSAGE_UNITS
) -> str:
    """`markdown` with a line of links to as many of `sources` as still fit one message
    (the chunk itself was cut to fit without them)."""
    for count in range(len(sources), 0, -1):
        text = with_sources(markdown, sources[:count])
        if rendered_units(text) <= limit:
            return text
    return markdown


def file_names_as_code(text: str, entities: list[MessageEntity]) -> list[MessageEntity]:
    """`entities` plus a code entity for each bare file name outside every other entity."""
    taken = [(e.offset, e.offset + e.length) for e in entities]
    added: list[MessageEntity] = []
    for match in _FILE_NAME.finditer(text):
        start = utf16_len(text[: match.start()])
        end = start + utf16_len(match.group())
        if not any(start < other_end and other_start < end for other_start, other_end in taken):
            added.append(MessageEntity(MessageEntity.CODE, start, end - start))
    return sorted([*entities, *added], key=lambda e: e.offset) if added else entities


def to_telegram(markdown: str) -> tuple[str, list[MessageEntity]]:
    """Plain text and entities for one chunk, ready for sendMessage/editMessageText.

    Markdown that renders to nothing visible is sent as its raw text rather than as an
    empty message Telegram would refuse.
    """
    text, converted = _convert(markdown)
    if not text.strip():
        return markdown.strip(), []
    entities = [MessageEntity.de_json(entity.to_dict(), None) for entity in converted]
    return text, file_names_as_code(text, entities)


def plain_fallback(markdown: str, converted: str, limit: int = MAX_MESSAGE_UNITS) -> str:
    """What to send without entities when Telegram rejects the formatting.

    The raw Markdown keeps link targets readable; when its syntax pushes it over the limit,
    the converted text (known to fit) is used instead.
    """
    raw = markdown.strip()
    return raw if raw and utf16_len(raw) <= limit else converted


def _fence_marker(line: str) -> str | None:
    match = _FENCE.match(line)
    return match.group(1) if match else None


def _closes(line: str, opener: str) -> bool:
    """Whether `line` closes a fence opened with `opener` (same character, at least as long)."""
    marker = _fence_marker(line)
    return (
        marker is not None
        and marker[0] == opener[0]
        and len(marker) >= len(opener)
        and not line.strip()[len(marker) :].strip()
    )


def split_blocks(markdown: str) -> list[str]:
    """Paragraph blocks: split on blank lines, except inside fenced code."""
    blocks: list[str] = []
    current: list[str] = []
    opener: str | None = None
    for line in markdown.split("\n"):
        if opener is not None:
            current.append(line)
            if _closes(line, opener):
                opener = None
            continue
        if not line.strip():
            if current:
                blocks.append("\n".join(current))
                current = []
            continue
        current.append(line)
        opener = _fence_marker(line)
    if current:
        blocks.append("\n".join(current))
    return blocks


def _has_content(lines: list[str]) -> bool:
    """Whether `lines` hold anything besides blank lines and code fences."""
    return any(line.strip() and _fence_marker(line) is None for line in lines)


def _with_close(lines: list[str], opener: str | None) -> str:
    """Join `lines`, closing the code fence still open at their end (opened with `opener`)."""
    text = "\n".join(lines)
    return f"{text}\n{opener}" if opener else text


def _split_code(block: str, fits: Callable[[str], bool]) -> list[str]:
    """Split one fenced code block that is too big for a message at line boundaries.

    A fenced code block cut in two is closed at the end of one piece and reopened (with its
    language) at the start of the next, so both pieces still render as code.
    """
    pieces: list[str] = []
    current: list[str] = []
    # The fence line of the code block open at the end of `current`, and its marker.
    open_line: str | None = None
    opener: str | None = None
    for line in block.split("\n"):
        if opener is not None:
            after_line, after = (None, None) if _closes(line, opener) else (open_line, opener)
        elif (marker := _fence_marker(line)) is not None:
            after_line, after = line, marker
        else:
            after_line, after = None, None
        prefix = [open_line] if open_line is not None else []
        candidate = [*current, line]
        if _has_content(current) and not fits(_with_close(candidate, after)):
            pieces.append(_with_close(current, opener))
            current = list(prefix)
            candidate = [*current, line]
        if fits(_with_close(candidate, after)):
            current = candidate
        else:
            # One line alone is too long: cut it, each part wrapped as the line would be.
            def fits_part(part: str, wrap: list[str] = prefix, fence: str | None = opener) -> bool:
                return fits(_with_close([*wrap, part], fence))

            pieces.extend(
                _with_close([*prefix, part], opener) for part in hard_split(line, fits_part)
            )
            current = list(prefix)
        open_line, opener = after_line, after
    if _has_content(current):
        pieces.append("\n".join(current))
    return pieces


def _segments(block: str) -> list[tuple[str, bool]]:
    """`block` as runs of lines: prose, and fenced code (from its fence to the closing one,
    or to the block's end), each with whether it is code."""
    runs: list[tuple[list[str], bool]] = []
    opener: str | None = None
    for line in block.split("\n"):
        if opener is not None:
            runs[-1][0].append(line)
            if _closes(line, opener):
                opener = None
            continue
        opener = _fence_marker(line)
        code = opener is not None
        if runs and runs[-1][1] == code and not code:
            runs[-1][0].append(line)
        else:
            runs.append(([line], code))
    return [("\n".join(lines), code) for lines, code in runs]


def _split_block(block: str, fits: Callable[[str], bool]) -> list[str]:
    """Pieces of one block, each fitting: prose cut and styled by `split_paragraph`, fenced
    code by `_split_code`, then packed back together line by line."""
    segments = [
        (text if code else attach_lone_markers(text), code) for text, code in _segments(block)
    ]
    whole = "\n".join(text for text, _ in segments)
    if fits(whole):
        return [whole]
    pieces = [
        piece
        for text, code in segments
        for piece in (_split_code(text, fits) if code else split_paragraph(text, fits))
    ]
    return pack(pieces, "\n", fits)


def split_markdown(
    markdown: str,
    limit: int = MAX_MESSAGE_UNITS,
    measure: Callable[[str], int] = rendered_units,
) -> list[str]:
    """Markdown chunks, in order, each rendering to at most `limit` units.

    Chunks break between paragraphs where possible, else between lines, else at a space
    (`channels.chunking`: not inside a short aside), and never inside a code block without
    closing and reopening it; a style cut in two is closed and reopened (its markers render
    to nothing, so the measure is unchanged). Blank-only input gives no chunks.
    """

    def fits(text: str) -> bool:
        return measure(text) <= limit

    pieces = (
        piece for block in split_blocks(markdown.strip()) for piece in _split_block(block, fits)
    )
    return pack(pieces, "\n\n", fits)
