"""Split a Markdown file into overlapping chunks of about N tokens that remember their lines.

Chunks are cut on line boundaries so every hit can be cited as `path#Lstart-Lend`; a single
line longer than a chunk is cut into pieces that all carry its line number. HTML comments
(operator notes such as the bundled template's explanations) are not memory and are blanked
out first, line breaks kept, so they never turn up in recall.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bot.context.tokens import CHARS_PER_TOKEN

# docs/contracts.md's token estimate: four characters per token.

_COMMENT_RE = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)


@dataclass(frozen=True, slots=True)
class Chunk:
    start_line: int  # 1-based, inclusive
    end_line: int
    text: str


@dataclass(frozen=True, slots=True)
class _Piece:
    line: int
    text: str


def blank_comments(text: str) -> str:
    """`text` with HTML comments removed but their newlines kept, so line numbers hold."""
    return _COMMENT_RE.sub(lambda m: "\n" * m.group().count("\n"), text)


def _pieces(text: str, max_chars: int) -> list[_Piece]:
    pieces: list[_Piece] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if len(line) <= max_chars:
            pieces.append(_Piece(number, line))
            continue
        for start in range(0, len(line), max_chars):
            pieces.append(_Piece(number, line[start : start + max_chars]))
    return pieces


def _join(pieces: list[_Piece]) -> str:
    # Pieces of one long line join without a newline, so line i of a chunk's text is always
    # file line start_line + i.
    parts: list[str] = []
    for i, piece in enumerate(pieces):
        if i and piece.line != pieces[i - 1].line:
            parts.append("\n")
        parts.append(piece.text)
    return "".join(parts)


def chunk_text(text: str, *, chunk_tokens: int, overlap_tokens: int) -> list[Chunk]:
    """Chunks of at most `chunk_tokens` (estimated) each, the next starting about
    `overlap_tokens` before the previous one ended. Blank-only chunks are dropped."""
    max_chars = max(1, chunk_tokens * CHARS_PER_TOKEN)
    overlap_chars = max(0, min(overlap_tokens, chunk_tokens - 1) * CHARS_PER_TOKEN)
    pieces = _pieces(blank_comments(text), max_chars)
    chunks: list[Chunk] = []
    start = 0
    while start < len(pieces):
        end = start
        size = 0
        # Every chunk takes at least one piece; "+ 1" counts the newline joining them.
        while end < len(pieces) and (end == start or size + len(pieces[end].text) + 1 <= max_chars):
            size += len(pieces[end].text) + 1
            end += 1
        body = _join(pieces[start:end])
        if body.strip():
            chunks.append(Chunk(pieces[start].line, pieces[end - 1].line, body))
        if end >= len(pieces):
            break
        # Step back over whole pieces until the overlap is used up, always moving forward.
        next_start = end
        carried = 0
        while next_start - 1 > start:
            size = len(pieces[next_start - 1].text)
            if carried + size > overlap_chars:
                break
            next_start -= 1
            carried += size + 1
        start = next_start
    return chunks
