"""The language a conversation is written in, when its script says so for certain, so the
summarizer is asked for that language by name rather than left to guess from a transcript
full of English tool output and headings.

Only scripts that belong to one language are named (Chinese, Japanese, Korean, Greek,
Hebrew, Thai, Armenian, Georgian); for Latin, Cyrillic or Arabic script, which many
languages share, the general rule ("write in the conversation's language") stands alone.
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from collections.abc import Iterable

# Unicode character-name prefixes of scripts that name one language.
_SCRIPTS = {
    "CJK": "Chinese",
    "HIRAGANA": "Japanese",
    "KATAKANA": "Japanese",
    "HANGUL": "Korean",
    "GREEK": "Greek",
    "HEBREW": "Hebrew",
    "THAI": "Thai",
    "ARMENIAN": "Armenian",
    "GEORGIAN": "Georgian",
}
# The named script must hold at least this share of the letters people wrote.
MIN_SHARE = 0.3
# Japanese mixes kanji with kana: this much kana among CJK letters makes it Japanese.
KANA_SHARE = 0.1


def _script(char: str) -> str:
    name = unicodedata.name(char, "")
    for prefix, language in _SCRIPTS.items():
        if name.startswith(prefix):
            return language if prefix != "CJK" else "Han"
    return "other"


def conversation_language(texts: Iterable[str]) -> str | None:
    """The language the people wrote `texts` in, when their script names it; else None."""
    counts: Counter[str] = Counter()
    for text in texts:
        counts.update(_script(c) for c in text if c.isalpha())
    letters = counts.total()
    han, kana = counts.pop("Han", 0), counts.pop("Japanese", 0)
    if han or kana:
        counts["Japanese" if kana >= (han + kana) * KANA_SHARE else "Chinese"] += han + kana
    if not letters:
        return None
    script, count = counts.most_common(1)[0]
    if script == "other" or count < letters * MIN_SHARE:
        return None
    return script
