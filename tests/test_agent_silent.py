"""Tests for bot.agent.silent: NO_REPLY detection, stripping and the streaming gate."""

from __future__ import annotations

import itertools
import random

import pytest

from bot.agent.silent import SilentGate, is_silent, strip_silent

SILENT_REPLIES = [
    "NO_REPLY",
    "  NO_REPLY\n",
    "\n\nNO_REPLY  ",
    "**NO_REPLY**",
    "_NO_REPLY_",
    " *NO_REPLY",
]

NON_SILENT_REPLIES = [
    "Hello there!",
    "Sure, done.\n\nNO_REPLY",
    "Saved it to memory. NO_REPLY\n",
    "Noted **NO_REPLY**",
    "NO_REPLY is the token I use to stay quiet.",
    "The flag NO_REPLY appears mid-sentence here.",
    "NO",
    "NO_REPL",
    "NOPE, not today",
    "FOO_NO_REPLY",
    "   leading spaces and trailing   \n\n",
    "Line one\nline two ends with NO_RE",
    "**bold** and _italic_ text with __under__",
    "Multi\n\n\nparagraph\n\n  text  \n",
    "Emoji 🦐 and CJK 漢字 and RTL שלום NO_REPLY",
    "Tricky **NO_REPLY** in the middle, then more.",
    "NO_REPLY\nbut then real text",
    "x" * 300 + " NO_REPLY",
    "**Done.**NO_REPLY",
    "Saved it.**NO_REPLY**",
    "Done.****NO_REPLY",
    "**bold** then more**NO_REPLYING",
]


def random_chunks(text: str, rng: random.Random) -> list[str]:
    cuts = sorted(rng.sample(range(1, len(text)), k=rng.randint(0, len(text) - 1)))
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


def run_gate(chunks: list[str]) -> tuple[SilentGate, list[str], str]:
    gate = SilentGate()
    outs = [gate.feed(chunk) for chunk in chunks]
    return gate, outs, gate.finish()


@pytest.mark.parametrize("text", SILENT_REPLIES)
def test_is_silent(text: str) -> None:
    assert is_silent(text)
    assert strip_silent(text) == ""


@pytest.mark.parametrize(
    "text", ["", "   ", "no_reply", "NO_REPLY.", "NO_REPLY!", "Okay NO_REPLY", "NO_REPLYING"]
)
def test_not_silent(text: str) -> None:
    assert not is_silent(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Done.\n\nNO_REPLY", "Done."),
        ("Done. NO_REPLY  \n", "Done."),
        ("Done. **NO_REPLY**", "Done."),
        ("Done.NO_REPLY", "Done.NO_REPLY"),  # not standalone
        ("**Done.**NO_REPLY", "**Done.**"),  # glued behind the closing emphasis
        ("Saved it.**NO_REPLY", "Saved it."),  # the markers were the token's own
        ("Saved it.**NO_REPLY**\n", "Saved it."),
        ("Say NO_REPLY to stay quiet.", "Say NO_REPLY to stay quiet."),
        ("NO_REPLY\nthen text", "NO_REPLY\nthen text"),
        ("trailing space   ", "trailing space"),
        ("NO_REPLY", ""),
        ("", ""),
    ],
)
def test_strip_silent(text: str, expected: str) -> None:
    assert strip_silent(text) == expected


@pytest.mark.parametrize("text", SILENT_REPLIES)
def test_gate_never_releases_silent_reply_for_any_split(text: str) -> None:
    n = len(text)
    for mask in range(2 ** (n - 1)):
        cuts = [i for i in range(1, n) if mask >> (i - 1) & 1]
        bounds = [0, *cuts, n]
        chunks = [text[a:b] for a, b in itertools.pairwise(bounds)]
        gate, outs, last = run_gate(chunks)
        assert outs == [""] * len(chunks)
        assert last == ""
        assert gate.silent
        assert gate.released == ""


@pytest.mark.parametrize("seed", range(40))
def test_gate_output_matches_strip_for_random_splits(seed: int) -> None:
    rng = random.Random(seed)
    for text in NON_SILENT_REPLIES:
        if len(text) < 2:
            continue
        gate, outs, last = run_gate(random_chunks(text, rng))
        assert "".join(outs) + last == strip_silent(text), text
        assert gate.released == strip_silent(text)
        assert not gate.silent


def test_gate_releases_real_text_promptly() -> None:
    gate = SilentGate()
    assert gate.feed("N") == ""
    assert gate.feed("O") == ""
    assert gate.feed("PE, ") == "NOPE,"  # cannot become NO_REPLY any more
    assert gate.feed("it rains") == " it rains"


def test_gate_holds_possible_trailing_token() -> None:
    gate = SilentGate()
    assert gate.feed("All saved.\n\nNO_RE") == "All saved."
    assert gate.feed("PLY") == ""
    assert gate.finish() == ""
    assert gate.released == "All saved."
    assert not gate.silent


def test_gate_releases_held_text_when_token_turns_out_to_be_prose() -> None:
    gate = SilentGate()
    assert gate.feed("Use NO_") == "Use"
    assert gate.feed("REPLY wisely") == " NO_REPLY wisely"
    assert gate.finish() == ""


def test_gate_empty_reply() -> None:
    gate, outs, last = run_gate([])
    assert outs == [] and last == ""
    assert not gate.silent
