"""The NO_REPLY convention: detect a silent reply, strip a trailing token, and gate a stream.

A reply that is only the token is never delivered, streamed or shown as typing; real text
followed by the token is delivered without it, also when the token is glued to the text's
closing emphasis (`**Done.**NO_REPLY`).
"""

from __future__ import annotations

import re

SILENT_TOKEN = "NO_REPLY"

# Models sometimes bold or italicise the token (`**NO_REPLY**`), so up to three `*`/`_` on
# either side still count; anything else around it makes it ordinary text. Matching is
# case-sensitive: the prompt asks for the exact token and "no_reply" may be real prose.
_EMPHASIS = "*_"
_MAX_EMPHASIS = 3
_TOKEN = rf"[*_]{{0,{_MAX_EMPHASIS}}}{SILENT_TOKEN}[*_]{{0,{_MAX_EMPHASIS}}}"
_SILENT_RE = re.compile(rf"\s*{_TOKEN}\s*")
# `(?<!\S)`: the token must stand alone, so "FOO_NO_REPLY" is left as it is, unless it
# directly follows emphasis markers ("…**NO_REPLY"). `\Z`, not `$`, because `$` also
# matches before a final newline.
_TRAILING_RE = re.compile(
    rf"(?:(?<!\S){_TOKEN}|(?<=[*_]){SILENT_TOKEN}[*_]{{0,{_MAX_EMPHASIS}}})\s*\Z"
)
# Longest non-whitespace form of the token: emphasis, token, emphasis.
_TOKEN_SPAN = len(SILENT_TOKEN) + 2 * _MAX_EMPHASIS


def is_silent(text: str) -> bool:
    """True iff `text` is the silent token alone, ignoring whitespace and light emphasis."""
    return _SILENT_RE.fullmatch(text) is not None


def strip_silent(text: str) -> str:
    """Remove a trailing standalone NO_REPLY and trailing whitespace; "" when nothing is left.

    Markers glued in front of the token go with it when they would open emphasis, and stay
    when they close emphasis the text opened ("**Done.**NO_REPLY" -> "**Done.**").
    """
    match = _TRAILING_RE.search(text)
    if match is None:
        return text.rstrip()
    head = text[: match.start()]
    bare = head.rstrip(_EMPHASIS)
    marks = head[len(bare) :]
    if marks and bare.count(marks) % 2 == 0:
        head = bare
    return head.rstrip()


def _could_start_token(s: str) -> bool:
    """True if some continuation of `s` matches the token followed only by whitespace."""
    i = 0
    while i < len(s) and i < _MAX_EMPHASIS and s[i] in _EMPHASIS:
        i += 1
    rest = s[i:]
    if len(rest) <= len(SILENT_TOKEN):
        return SILENT_TOKEN.startswith(rest)
    if not rest.startswith(SILENT_TOKEN):
        return False
    tail = rest[len(SILENT_TOKEN) :]
    j = 0
    while j < len(tail) and j < _MAX_EMPHASIS and tail[j] in _EMPHASIS:
        j += 1
    return tail[j:].strip() == ""


class SilentGate:
    """Streaming filter that releases reply text only once it cannot turn out to be silent.

    Everything released is a prefix of `strip_silent(full_reply)`, whatever arrives later:
    text that could still become a bare NO_REPLY is held entirely, and afterwards trailing
    whitespace plus anything that could begin a trailing token stays held until it is
    disambiguated or `finish()` is called.
    """

    def __init__(self) -> None:
        self._released = ""
        # Received but not yet released. Released text never ends in whitespace, so this
        # is the only part a trailing token could still start in.
        self._pending = ""
        self._silent = False

    @property
    def released(self) -> str:
        """All text released so far, including what `finish()` returned."""
        return self._released

    @property
    def silent(self) -> bool:
        """True once `finish()` has seen a reply that was only the silent token."""
        return self._silent

    def feed(self, delta: str) -> str:
        """Add a streamed chunk and return the text that is now safe to show."""
        self._pending += delta
        cut = self._safe_length()
        out, self._pending = self._pending[:cut], self._pending[cut:]
        self._released += out
        return out

    def finish(self) -> str:
        """Return the rest of the reply with any trailing token removed ("" if it was silent)."""
        full = self._released + self._pending
        self._silent = is_silent(full)
        final = strip_silent(full)
        out = final[len(self._released) :]
        self._released = final
        self._pending = ""
        return out

    def _safe_length(self) -> int:
        """How many leading chars of the pending text stay in the final reply whatever follows."""
        pending = self._pending
        # Trailing whitespace is dropped by strip_silent unless more text follows.
        cut = len(pending.rstrip())
        at_start = not self._released
        # A trailing token's visible part is at most _TOKEN_SPAN chars, so it can only start
        # in that window before the trailing whitespace; the earliest candidate wins.
        # Emphasis markers are held with a token that may follow them, whatever precedes them.
        for start in range(max(0, cut - _TOKEN_SPAN), cut + 1):
            prev = pending[start - 1] if start > 0 else ""
            standalone = prev.isspace() if prev else at_start
            glued = prev in _EMPHASIS if prev else False
            if start < len(pending) and pending[start] in _EMPHASIS:
                glued = True
            if (standalone or glued) and _could_start_token(pending[start:]):
                return len(pending[:start].rstrip().rstrip(_EMPHASIS))
        return cut
