"""Pure search logic: turn a message into search terms, score a chunk, pick its best lines.

The index matches any substring of three or more characters (trigrams: FTS5's trigram
tokenizer in SQLite, pg_trgm in PostgreSQL), so it works for languages written without
spaces. Words are lightly stemmed (a prefix matches every inflection as a substring); runs
of CJK characters are searched by their trigrams and scored by their bigrams, since most
Chinese and Japanese words are two characters long. Two-character runs, which no trigram
can find, are looked up by plain substring search when the index finds nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MIN_TERM_CHARS = 3  # the trigram tokenizer cannot find anything shorter
MAX_QUERY_TERMS = 32  # a long message must not become a huge OR query
MIN_STEM_CHARS = 4
# A snippet holding this many distinct query terms counts as a full match: long messages
# have many terms, and a note rarely shares more than a few of them.
SATURATION_TERMS = 4
# Rank weight: a candidate's score is scaled between this and 1 by its BM25 relative to the
# best candidate, so the best hit keeps its term coverage and weaker ones fall behind.
BM25_FLOOR = 0.5
SUFFIXES = ("ing", "ies", "ied", "es", "ed", "ly", "s")

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f"
_TOKEN_RE = re.compile(rf"(?P<cjk>[{_CJK}]+)|(?P<word>(?:(?![{_CJK}])[^\W_])+)")

STOPWORDS = frozenset(
    """
    a about above after again all also am an and any are aren as at be because been before
    being below between both but by can could did didn do does doesn doing don down during
    each few for from further had hadn has hasn have haven having he her here hers herself
    him himself his how i if in into is isn it its itself just let me more most my myself
    no nor not now of off on once only or other our ours ourselves out over own same she
    should so some such than that the their theirs them themselves then there these they
    this those through to too under until up very was wasn we were weren what when where
    which while who whom why will with won would you your yours yourself yourselves
    hi hello hey please thanks thank okay ok yes yeah tell know remember remind recall
    """.split()
)


@dataclass(frozen=True, slots=True)
class QueryPlan:
    """What to ask the index and how to score what comes back."""

    match_terms: tuple[str, ...]  # what the trigram index can look up (3+ characters)
    terms: tuple[str, ...]  # case-folded substrings whose presence makes up the score
    like_terms: tuple[str, ...]  # two-character CJK words, for the substring fallback

    @property
    def empty(self) -> bool:
        return not self.terms


def stem(word: str) -> str:
    """Strip one common English suffix, keeping at least MIN_STEM_CHARS characters."""
    for suffix in SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= MIN_STEM_CHARS:
            return word[: -len(suffix)]
    return word


def _ngrams(run: str, n: int) -> list[str]:
    return [run[i : i + n] for i in range(len(run) - n + 1)]


def build_query(text: str) -> QueryPlan:
    """Plan a search for `text`: its distinctive words and CJK n-grams, stopwords dropped."""
    match_terms: list[str] = []
    terms: list[str] = []
    like_terms: list[str] = []

    def add(target: list[str], item: str) -> None:
        if item not in target:
            target.append(item)

    for token in _TOKEN_RE.finditer(text.casefold()):
        if token["cjk"]:
            run = token["cjk"]
            if len(run) < 2:
                continue
            for bigram in _ngrams(run, 2):
                add(terms, bigram)
            if len(run) == 2:
                add(like_terms, run)
            for trigram in _ngrams(run, MIN_TERM_CHARS):
                add(match_terms, trigram)
            continue
        word = token["word"]
        if len(word) < MIN_TERM_CHARS or word in STOPWORDS:
            continue
        stemmed = stem(word)
        add(terms, stemmed)
        add(match_terms, stemmed)
    return QueryPlan(
        match_terms=tuple(match_terms[:MAX_QUERY_TERMS]),
        terms=tuple(terms[:MAX_QUERY_TERMS]),
        like_terms=tuple(like_terms),
    )


def coverage(text: str, terms: tuple[str, ...]) -> float:
    """Share of the query's terms found in `text`, saturating at SATURATION_TERMS hits."""
    if not terms:
        return 0.0
    folded = text.casefold()
    hits = sum(1 for term in terms if term in folded)
    return min(1.0, hits / min(len(terms), SATURATION_TERMS))


def blend_score(term_coverage: float, bm25: float, best_bm25: float) -> float:
    """Final 0..1 score. The store's BM25 rank is negative, lower is better (as FTS5's
    bm25()); `best_bm25` is the lowest among the candidates. Without a usable rank (substring
    fallback) coverage alone counts.
    """
    if best_bm25 >= 0 or bm25 >= 0:
        return term_coverage
    relative = min(1.0, bm25 / best_bm25)
    return term_coverage * (BM25_FLOOR + (1 - BM25_FLOOR) * relative)


@dataclass(frozen=True, slots=True)
class Snippet:
    start_line: int
    end_line: int
    text: str


def best_lines(text: str, first_line: int, terms: tuple[str, ...], max_chars: int) -> Snippet:
    """The run of whole lines of a chunk, at most `max_chars` long, holding the most distinct
    query terms (earliest wins ties), without edge lines that hold none. A lone line longer
    than that is cut around its first hit.
    """
    lines = text.split("\n")
    folded = [line.casefold() for line in lines]
    found = [[i for i, term in enumerate(terms) if term in line] for line in folded]
    best = (-1, 0, 0)  # (distinct hits, start index, end index exclusive)
    # Two pointers: a window's end only moves forward as its start does, and per-term
    # counts say how many distinct terms the window holds.
    counts = [0] * len(terms)
    distinct = 0
    end = 0
    size = -1  # chars of lines[start:end] joined by newlines; -1 for an empty window
    for start in range(len(lines)):
        if end <= start:  # empty window (after an overlong line): restart here
            end, size, counts, distinct = start, -1, [0] * len(terms), 0
        while end < len(lines) and (end == start or size + 1 + len(lines[end]) <= max_chars):
            size += 1 + len(lines[end])
            for i in found[end]:
                distinct += counts[i] == 0
                counts[i] += 1
            end += 1
        if distinct > best[0]:
            best = (distinct, start, end)
        for i in found[start]:  # the start line leaves the window
            counts[i] -= 1
            distinct -= counts[i] == 0
        size -= 1 + len(lines[start])
    _, start, end = best
    # Cite the lines that matter: drop edge lines that hold no term (headings, blanks).
    while end - start > 1 and not found[start]:
        start += 1
    while end - start > 1 and not found[end - 1]:
        end -= 1
    body = "\n".join(lines[start:end])
    if len(body) > max_chars:
        lowered = body.casefold()
        first_hit = min((i for t in terms if (i := lowered.find(t)) >= 0), default=0)
        # Start a little before the hit so it reads in context.
        begin = max(0, min(first_hit - max_chars // 4, len(body) - max_chars))
        body = body[begin : begin + max_chars]
    return Snippet(first_line + start, first_line + end - 1, body.strip("\n"))
