"""Find the exact identifiers in text (URLs, paths, host:port, hex ids, UUIDs, ticket ids,
long numbers) so compaction can check that a summary kept them verbatim.

A summary that paraphrases "the deploy id" instead of copying `9f3a2c1b` has lost the one
thing a person will ask for later; these are the strings that must survive.
"""

from __future__ import annotations

import re

# Longer strings are data (a base64 blob, a long query string), not something to quote.
MAX_IDENTIFIER_CHARS = 200
HEX_MIN_CHARS = 8
LONG_NUMBER_MIN_DIGITS = 6

_TRAILING_PUNCTUATION = ".,;:!?)]}'\""

# Order matters: earlier patterns claim their span first, so the path inside a URL or the
# digits inside a UUID are not reported twice.
_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(r"\b(?:https?|wss?|ftp|ssh|git|s3)://[^\s<>\"'`]+", re.IGNORECASE),
    re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.IGNORECASE),
    re.compile(r"\b[A-Za-z]:\\[^\s<>\"'`|?*]+"),  # Windows paths
    # Absolute, home-relative and dot-relative paths with at least two segments.
    re.compile(r"(?<![\w/.~:-])(?:~|\.{1,2})?/(?:[\w.@%+=,-]+/)+[\w.@%+=,-]*[\w@%+=-]"),
    # Relative paths with a file extension: src/app.py, docs/readme/context.md.
    re.compile(r"(?<![\w/.-])(?:[\w@-][\w.@-]*/)+[\w@-][\w.@-]*\.[A-Za-z0-9]{1,8}\b"),
    re.compile(
        r"\b(?:(?:\d{1,3}\.){3}\d{1,3}|localhost|(?:[a-z0-9-]+\.)+[a-z]{2,}):\d{2,5}\b",
        re.IGNORECASE,
    ),
    re.compile(r"\b[A-Z][A-Z0-9]{1,9}-\d{1,7}\b"),  # ticket ids: INC-4821, JIRA-77
    # Hex ids mix digits and letters; an all-letter word ("deadbeef", "defaced") is prose
    # and an all-digit run is a number (below).
    re.compile(rf"\b(?=[0-9a-fA-F]*[a-fA-F])(?=[0-9a-fA-F]*\d)[0-9a-fA-F]{{{HEX_MIN_CHARS},}}\b"),
    re.compile(rf"(?<![\w.])\d{{{LONG_NUMBER_MIN_DIGITS},}}(?!\w)"),
)


def extract_identifiers(text: str) -> list[str]:
    """Identifiers in `text`, in order of first appearance, without duplicates."""
    taken: list[tuple[int, int]] = []
    found: list[tuple[int, str]] = []
    for pattern in _PATTERNS:
        for match in pattern.finditer(text):
            start, end = match.span()
            value = match.group().rstrip(_TRAILING_PUNCTUATION)
            end = start + len(value)
            if not value or any(s < end and start < e for s, e in taken):
                continue
            if len(value) > MAX_IDENTIFIER_CHARS:
                continue
            taken.append((start, end))
            found.append((start, value))
    ordered: list[str] = []
    seen: set[str] = set()
    for _, value in sorted(found):
        if value not in seen:
            seen.add(value)
            ordered.append(value)
    return ordered


def missing_identifiers(summary: str, identifiers: list[str]) -> list[str]:
    """The identifiers that do not appear verbatim in `summary`."""
    return [value for value in identifiers if value not in summary]
