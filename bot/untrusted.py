"""Wrap chat messages and tool output in untrusted-content markers the sender cannot forge.

Marker ids come from server-side ids, and anything inside the wrapped text that reads as a
marker (in any case, in look-alike letters of any script, or split by invisible characters)
is replaced before wrapping.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import re
import unicodedata
from collections.abc import Mapping
from typing import Any

PLACEHOLDER = "[marker removed]"
MARKER_ID_LENGTH = 16
# A name longer than this (a file's, a MIME type) is cut: nothing real needs more.
NAME_MAX_CHARS = 200

_SOURCE_RE = re.compile(r"[A-Za-z0-9_.:-]+")
_MARKER_ID_RE = re.compile(r"[A-Za-z0-9]+")

KEYWORD = "untrusted"
# What look-alikes are folded to: the keyword's letters and the marker brackets.
_TARGETS = frozenset(KEYWORD) | {"<", ">"}

# Unicode's Default_Ignorable_Code_Point ranges (DerivedCoreProperties.txt): characters that
# render as nothing, so they can split a marker without changing how it reads. Tag characters
# (U+E0000 block) and all variation selectors are among them.
_DEFAULT_IGNORABLE = (
    (0x00AD, 0x00AD),
    (0x034F, 0x034F),
    (0x061C, 0x061C),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x206F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)

# Brackets the confusables table leaves out, some standing for two or three of ours.
_BRACKETS = {
    "\u00ab": "<<",  # guillemets
    "\u00bb": ">>",
    "\u226a": "<<",  # much less/greater-than
    "\u226b": ">>",
    "\u22d8": "<<<",
    "\u22d9": ">>>",
    "\u27ea": "<<",  # mathematical double angle brackets
    "\u27eb": ">>",
    "\u300a": "<<",  # CJK double angle brackets
    "\u300b": ">>",
    "\u3008": "<",  # CJK and mathematical angle brackets
    "\u3009": ">",
    "\u27e8": "<",
    "\u27e9": ">",
}

# Latin letters known by name: small capitals, negative squared and regional-indicator
# letters, letters with strokes or hooks that no decomposition reduces.
_LATIN_NAME_RE = re.compile(
    r"^(?:.*\bLATIN\b|REGIONAL INDICATOR SYMBOL)"
    r".*\bLETTER (?:SMALL CAPITAL )?([A-Z])(?: WITH .*)?$"
)

# A marker fragment: the keyword, with the bracket runs and END_ of a marker when present.
_MARKER_RE = re.compile(
    r"(?P<open><{3,}[ \t]*)?(?P<end>end_)?untrusted(?P<close>[^\n]{0,120}?>{3,})?"
)
# The plain word as prose writes it; see `sanitize` for why it may stay.
_PROSE_FORMS = frozenset({KEYWORD, KEYWORD.capitalize()})
# Categories a name loses: controls, format characters (bidi overrides, zero-width ones)
# and lone surrogates.
_HIDDEN = frozenset({"Cc", "Cf", "Cs"})
_ASCII_CONTROLS = dict.fromkeys(c for c in [*range(32), 127] if chr(c) not in "\t\n\r")


def _invisible(ch: str) -> bool:
    code = ord(ch)
    if any(low <= code <= high for low, high in _DEFAULT_IGNORABLE):
        return True
    category = unicodedata.category(ch)
    return category == "Cf" or (category == "Cc" and ch not in "\t\n\r")


def _latin_letter(ch: str) -> str:
    match = _LATIN_NAME_RE.match(unicodedata.name(ch, ""))
    return match.group(1).lower() if match else ""


@functools.cache
def _lookalikes() -> dict[str, str]:
    """Every non-ASCII character Unicode's confusables table (TR39, via the
    confusable_homoglyphs package) says can pass for a keyword letter or a bracket, mapped to
    it. Groups around small capitals count too: Cyrillic "т" and Greek "τ" pass for "ᴛ"."""
    from confusable_homoglyphs.confusables import confusables_data

    table: dict[str, str] = {}
    for key, glyphs in confusables_data.items():
        if len(key) != 1:
            continue
        target = key.lower() if key.isascii() else _latin_letter(key)
        if target not in _TARGETS:
            continue
        for glyph in (key, *(g["c"] for g in glyphs)):
            if len(glyph) == 1 and not glyph.isascii():
                table.setdefault(glyph, target)
    return table


@functools.lru_cache(maxsize=16384)
def _fold_char(ch: str) -> str:
    """How `ch` reads, for marker detection: "" when invisible, else NFKD without combining
    marks, look-alikes mapped to the letter or bracket they pass for, case-folded."""
    if ch.isascii():
        return "" if ord(ch) in _ASCII_CONTROLS else ch.lower()
    if _invisible(ch):
        return ""
    if ch in _BRACKETS:
        return _BRACKETS[ch]
    out: list[str] = []
    for part in unicodedata.normalize("NFKD", ch):
        if unicodedata.combining(part) or _invisible(part):
            continue
        out.append(_BRACKETS.get(part) or _lookalikes().get(part) or _latin_letter(part) or part)
    return "".join(out).casefold()


def sanitize(text: str) -> str:
    """Replace anything that reads as a marker fragment with a visible placeholder.

    Detection runs on a folded copy (see `_fold_char`); replacement happens in the
    original, so text without look-alikes is returned unchanged.

    The plain ASCII word "untrusted" (or "Untrusted") with no marker brackets and no END_
    is left alone, so prose about untrusted links survives. That opens no hole: the markers
    are upper-case and bracketed, and every disguised spelling (another case, a look-alike
    letter, an invisible character inside, brackets or END_ around it) is still replaced.
    """
    if text.isascii() and KEYWORD not in text.lower().translate(_ASCII_CONTROLS):
        return text
    # Folding distinct characters once and translating in C keeps long texts fast; the
    # position map is built only when something matched.
    folds = {ord(ch): _fold_char(ch) for ch in set(text)}
    matches = list(_MARKER_RE.finditer(text.translate(folds)))
    if not matches:
        return text
    origin: list[int] = []  # origin[k]: index in `text` of folded char k
    for i, ch in enumerate(text):
        origin.extend([i] * len(folds[ord(ch)]))
    pieces: list[str] = []
    last = 0
    for match in matches:
        start, end = origin[match.start()], origin[match.end() - 1] + 1
        if start < last:  # a multi-char fold straddles two matches; the first covered it
            start = last
        bare = not (match["open"] or match["end"] or match["close"])
        if start >= end or (bare and text[start:end] in _PROSE_FORMS):
            continue
        pieces.append(text[last:start])
        pieces.append(PLACEHOLDER)
        last = end
    if not pieces:
        return text
    pieces.append(text[last:])
    return "".join(pieces)


def clean_name(text: str, limit: int = NAME_MAX_CHARS) -> str:
    """`text` from outside that is shown as a name (a file name, a MIME type, a sender) as
    one plain line: control, format and surrogate characters dropped, line breaks and
    other runs of whitespace made one space, anything that reads as a marker replaced, cut
    at `limit` characters. A name can then neither start a line of its own nor end the
    untrusted block it sits in."""
    kept = "".join(ch for ch in text if ch.isspace() or unicodedata.category(ch) not in _HIDDEN)
    line = sanitize(" ".join(kept.split()))
    return line if len(line) <= limit else line[: limit - 1] + "\u2026"


def wrap_untrusted(
    text: str, *, source: str, marker_id: str, meta: Mapping[str, Any] | None = None
) -> str:
    """Wrap `text` in markers naming `source`, with `meta` as one line of untrusted JSON.

    `marker_id` must come from a server-side id (see `marker_id_for`) so it is stable
    across turns, keeping the prompt byte-identical for caching, yet unknown to the sender.
    Raises ValueError if `source` or `marker_id` contain characters that could break the
    marker line.
    """
    if not _SOURCE_RE.fullmatch(source):
        raise ValueError(f"untrusted source must match {_SOURCE_RE.pattern}: {source!r}")
    if not _MARKER_ID_RE.fullmatch(marker_id):
        raise ValueError(f"marker id must be alphanumeric: {marker_id!r}")
    lines = [f'<<<UNTRUSTED source="{source}" id="{marker_id}">>>']
    if meta:
        # Sender names and chat titles are user-controlled too, so the line is sanitized.
        encoded = json.dumps(dict(meta), ensure_ascii=False, separators=(",", ":"), default=str)
        lines.append(f"untrusted metadata: {sanitize(encoded)}")
    lines.append(sanitize(text))
    lines.append(f'<<<END_UNTRUSTED id="{marker_id}">>>')
    return "\n".join(lines)


def marker_id_for(entry_id: str, secret: str = "") -> str:
    """Derive a stable marker id from a server-side entry id (HMAC-keyed when `secret` is set)."""
    if secret:
        digest = hmac.new(secret.encode(), entry_id.encode(), hashlib.sha256).hexdigest()
    else:
        digest = hashlib.sha256(entry_id.encode()).hexdigest()
    return digest[:MARKER_ID_LENGTH]
