"""Wrap chat messages and tool output in untrusted-content markers the sender cannot forge.

Marker ids come from server-side ids, and look-alikes of the markers inside the wrapped text
(fullwidth, homoglyph or zero-width-split forms) are replaced before wrapping.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import unicodedata
from collections.abc import Mapping
from typing import Any

PLACEHOLDER = "[marker removed]"
MARKER_ID_LENGTH = 16

_SOURCE_RE = re.compile(r"[A-Za-z0-9_.:-]+")
_MARKER_ID_RE = re.compile(r"[A-Za-z0-9]+")

# Invisible characters an attacker can slip into a marker so it no longer matches a plain
# search while still reading the same to the model.
_INVISIBLE = frozenset(
    "\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180e"
    "\u200b\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
    "\u2060\u2061\u2062\u2063\u2064\u2066\u2067\u2068\u2069\u3164\ufeff\uffa0"
    "\ufe00\ufe01\ufe02\ufe03\ufe04\ufe05\ufe06\ufe07"
    "\ufe08\ufe09\ufe0a\ufe0b\ufe0c\ufe0d\ufe0e\ufe0f"
)

# Look-alikes NFKC leaves alone: angle brackets and the Greek/Cyrillic capitals that pass
# for letters of UNTRUSTED.
_CONFUSABLES = {
    "\u2039": "<",  # single left-pointing angle quotation mark
    "\u203a": ">",
    "\u00ab": "<<",  # guillemets
    "\u00bb": ">>",
    "\u2329": "<",  # angle brackets
    "\u232a": ">",
    "\u3008": "<",
    "\u3009": ">",
    "\u27e8": "<",
    "\u27e9": ">",
    "\u02c2": "<",  # modifier letter arrowheads
    "\u02c3": ">",
    "\u1438": "<",  # Canadian syllabics
    "\u1433": ">",
    "\u226a": "<<",  # much less/greater-than
    "\u226b": ">>",
    "\u22d8": "<<<",
    "\u22d9": ">>>",
    "\u0395": "E",  # Greek
    "\u039d": "N",
    "\u03a4": "T",
    "\u0415": "E",  # Cyrillic
    "\u0405": "S",
    "\u0422": "T",
}

# A marker is the upper-case keyword, optionally with the bracket runs around it on the same
# line. Brackets alone (`>>>` Python prompts, `<<<` here-strings) cannot forge a marker and
# are left alone; lower-case "untrusted" is ordinary prose.
_LOOKALIKE_RE = re.compile(r"(?:<{3,}[ \t]*)?(?:END_)?UNTRUSTED(?:[^\n]{0,120}?>{3,})?")


def _fold(ch: str) -> str:
    if ch in _INVISIBLE:
        return ""
    mapped = _CONFUSABLES.get(ch)
    if mapped is not None:
        return mapped
    return unicodedata.normalize("NFKC", ch)


def sanitize(text: str) -> str:
    """Replace anything that reads as a marker fragment with a visible placeholder.

    Detection runs on a folded copy (NFKC, known look-alikes mapped, invisible characters
    dropped); replacement happens in the original, so text without look-alikes is
    returned unchanged.
    """
    if text.isascii() and "UNTRUSTED" not in text:
        return text
    folded: list[str] = []
    origin: list[int] = []  # origin[k]: index in `text` of the char folded[k] came from
    for i, ch in enumerate(text):
        for out in _fold(ch):
            folded.append(out)
            origin.append(i)
    pieces: list[str] = []
    last = 0
    for match in _LOOKALIKE_RE.finditer("".join(folded)):
        start, end = origin[match.start()], origin[match.end() - 1] + 1
        if start < last:  # a multi-char fold straddles two matches; the first covered it
            start = last
        if start < end:
            pieces.append(text[last:start])
            pieces.append(PLACEHOLDER)
            last = end
    if not pieces:
        return text
    pieces.append(text[last:])
    return "".join(pieces)


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
