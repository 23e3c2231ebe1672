"""Tests for bot.memory.chunking, bot.memory.query and bot.memory.index: chunk boundaries,
query planning, and the index over real Markdown (CJK, edits, deletes, private files) on
both stores (FTS5 in SQLite, pg_trgm in PostgreSQL)."""

from __future__ import annotations

import itertools
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.config import MemoryConfig
from bot.memory.chunking import CHARS_PER_TOKEN, chunk_text
from bot.memory.index import MemoryIndex
from bot.memory.query import (
    best_lines,
    blend_score,
    build_query,
    coverage,
    stem,
)
from bot.memory.scopes import scope_of, visible_scopes
from bot.store.base import Store, VisiblePaths
from bot.store.search import match_expression
from channels.registry import CHANNELS

ALL = VisiblePaths(everything=True)
GROUP = visible_scopes(scope_of(None, "agent:main:telegram:group:-100"), admin=False)

DAILY = """\
# 2025-03-14

- [2025-03-14 09:12] Alice asked to book the dentist for next Tuesday, 10:00.
- [2025-03-14 11:40] Deployed krill 0.3 to the staging box; port 8787 behind nginx.
- [2025-03-14 18:05] Bob's daughter Mia starts piano lessons on Thursdays.
"""

CURATED = """\
# Memory

- Alice prefers an oat flat white, no sugar.
- Alice's partner is called Sam; anniversary on 2 June.
"""

CJK = """\
# 2025-03-15

- [2025-03-15 08:00] 用户喜欢喝美式咖啡，不加糖。
- [2025-03-15 12:30] 来週の会議は火曜日の午後三時からです。
"""


# --- chunking ---------------------------------------------------------------------------------


def test_chunks_cover_every_line_with_overlap() -> None:
    text = "\n".join(f"line {i:03d} " + "x" * 50 for i in range(1, 201))
    chunks = chunk_text(text, chunk_tokens=100, overlap_tokens=20)
    assert len(chunks) > 1
    assert chunks[0].start_line == 1 and chunks[-1].end_line == 200
    for chunk in chunks:
        assert len(chunk.text) <= 100 * CHARS_PER_TOKEN
        lines = chunk.text.split("\n")
        assert len(lines) == chunk.end_line - chunk.start_line + 1
        assert lines[0].startswith(f"line {chunk.start_line:03d}")
    for prev, nxt in itertools.pairwise(chunks):
        assert prev.start_line < nxt.start_line <= prev.end_line  # overlapping, moving on


def test_long_line_is_split_but_keeps_its_line_number() -> None:
    text = "short\n" + "y" * 1000 + "\nend"
    chunks = chunk_text(text, chunk_tokens=50, overlap_tokens=0)
    assert all(len(c.text) <= 200 for c in chunks)
    middle = [c for c in chunks if "y" in c.text]
    assert all(c.start_line <= 2 <= c.end_line for c in middle)
    assert sum(c.text.count("y") for c in middle) == 1000


def test_blank_files_make_no_chunks() -> None:
    assert chunk_text("\n\n   \n", chunk_tokens=400, overlap_tokens=80) == []


# --- query planning and scoring ---------------------------------------------------------------


def test_query_drops_stopwords_and_stems() -> None:
    plan = build_query("What did we decide about the deployments on staging?")
    assert plan.terms == plan.match_terms == ("decide", "deployment", "stag")
    # A stem only needs to be a prefix of every form: the index matches substrings.
    assert stem("coffees") == "coffe" and stem("cat") == "cat"


def test_query_for_cjk_uses_trigrams_to_find_and_bigrams_to_score() -> None:
    plan = build_query("美式咖啡")
    assert plan.match_terms == ("美式咖", "式咖啡")
    assert plan.terms == ("美式", "式咖", "咖啡")
    two = build_query("咖啡")
    assert two.match_terms == () and two.like_terms == ("咖啡",) and not two.empty


def test_punctuation_never_reaches_the_match_and_chatter_plans_nothing() -> None:
    plan = build_query('say "cheese" AND (NEAR) *')
    assert plan.match_terms == ("say", "cheese", "near")
    # SQLite quotes each term as an FTS5 phrase, so not even a quote is query syntax.
    assert match_expression(plan.match_terms) == '"say" OR "cheese" OR "near"'
    assert match_expression(['a"b']) == '"a""b"'
    assert build_query("hi, ok?").empty


def test_coverage_saturates_and_blend_keeps_the_best() -> None:
    terms = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta")
    assert coverage("alpha beta gamma delta", terms) == 1.0
    assert coverage("alpha beta", terms) == 0.5
    assert blend_score(0.5, -2.0, -2.0) == 0.5
    assert blend_score(0.5, -1.0, -2.0) == pytest.approx(0.375)
    assert blend_score(0.8, 0.0, 0.0) == 0.8  # substring fallback: coverage alone


def test_best_lines_picks_the_densest_window() -> None:
    text = "\n".join(["intro"] * 20 + ["the oat flat white order"] + ["outro"] * 20)
    snip = best_lines(text, 10, ("oat", "white"), max_chars=60)
    assert "oat flat white" in snip.text
    assert snip.start_line <= 30 <= snip.end_line
    assert len(snip.text) <= 60


# --- the index --------------------------------------------------------------------------------


@pytest.fixture
async def index(tmp_path: Path, any_store: Store) -> AsyncIterator[MemoryIndex]:
    workspace = tmp_path / "workspace"
    (workspace / "memory").mkdir(parents=True)
    (workspace / "MEMORY.md").write_text(CURATED, encoding="utf-8")
    (workspace / "memory" / "2025-03-14.md").write_text(DAILY, encoding="utf-8")
    (workspace / "memory" / "2025-03-15.md").write_text(CJK, encoding="utf-8")
    (workspace / "USER.md").write_text("Alice is not indexed from here", encoding="utf-8")
    idx = MemoryIndex(any_store, workspace, MemoryConfig(chunk_tokens=50, chunk_overlap_tokens=10))
    yield idx


async def test_search_finds_lines_with_sources(index: MemoryIndex) -> None:
    hits = await index.search("when is the dentist appointment?", ALL)
    assert hits, "expected a hit"
    top = hits[0]
    assert top.path == "memory/2025-03-14.md"
    assert "dentist" in top.text
    assert top.start_line <= 3 <= top.end_line
    assert top.source == f"memory/2025-03-14.md#L{top.start_line}-L{top.end_line}"
    assert (await index.stats())[0] == 3  # USER.md is not memory


async def test_cjk_text_is_found(index: MemoryIndex) -> None:
    hits = await index.search("美式咖啡", ALL)
    assert hits and hits[0].path == "memory/2025-03-15.md" and "美式咖啡" in hits[0].text
    japanese = await index.search("会議は火曜日", ALL)
    assert japanese and "火曜日" in japanese[0].text
    two_chars = await index.search("咖啡", ALL)  # no trigram: the substring fallback finds it
    assert two_chars and "咖啡" in two_chars[0].text


async def test_private_file_is_left_out_when_asked(index: MemoryIndex) -> None:
    assert any(h.path == "MEMORY.md" for h in await index.search("oat flat white", ALL))
    group = await index.search("oat flat white Alice partner", GROUP)
    assert all(h.path != "MEMORY.md" for h in group)


async def test_edits_are_picked_up_before_the_next_search(index: MemoryIndex) -> None:
    await index.refresh()
    note = index.workspace / "memory" / "2025-03-14.md"
    assert not await index.search("harpsichord", ALL)
    note.write_text(DAILY + "- [2025-03-14 20:00] Mia switched to the harpsichord.\n")
    hits = await index.search("harpsichord", ALL)
    assert hits and hits[0].path == "memory/2025-03-14.md"
    assert hits[0].end_line >= 6
    note.write_text(DAILY)
    assert not await index.search("harpsichord", ALL)


async def test_deleting_a_file_removes_its_chunks(index: MemoryIndex) -> None:
    await index.refresh()
    files, chunks = await index.stats()
    (index.workspace / "memory" / "2025-03-15.md").unlink()
    report = await index.refresh()
    assert report.removed == ["memory/2025-03-15.md"]
    after_files, after_chunks = await index.stats()
    assert after_files == files - 1 and after_chunks < chunks
    assert not await index.search("美式咖啡", ALL)


async def test_touch_without_change_does_not_reindex(index: MemoryIndex) -> None:
    await index.refresh()
    note = index.workspace / "memory" / "2025-03-14.md"
    os.utime(note, (1, 1))
    report = await index.refresh()
    assert report.indexed == [] and report.unchanged == 3


async def test_new_subfolder_notes_and_symlinks(index: MemoryIndex, tmp_path: Path) -> None:
    workspace = index.workspace
    await index.refresh()
    (workspace / "memory" / "projects").mkdir()
    (workspace / "memory" / "projects" / "krill.md").write_text("Krill roadmap: heartbeat\n")
    outside = tmp_path / "outside.md"
    outside.write_text("leaked secret roadmap\n")
    (workspace / "memory" / "leak.md").symlink_to(outside)
    (workspace / "memory" / "alias.md").symlink_to(workspace / "MEMORY.md")
    report = await index.refresh()
    assert report.indexed == ["memory/projects/krill.md"]
    assert await index.search("roadmap", ALL) and not await index.search("leaked secret", ALL)
    # A note linking to MEMORY.md would smuggle it into groups; it is not indexed.
    assert all(h.path != "memory/alias.md" for h in await index.search("oat flat white", ALL))


async def test_changed_chunk_size_reindexes_everything(index: MemoryIndex, tmp_path: Path) -> None:
    await index.refresh()
    bigger = MemoryIndex(index.store, index.workspace, MemoryConfig())
    report = await bigger.refresh()
    assert len(report.indexed) == 3
    assert (await bigger.stats())[1] == 3  # one chunk per small file now


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_cli_reindex_and_search(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest
) -> None:
    from bot.cli import SUBCOMMANDS, build_parser
    from bot.config import load_config
    from tests.krill_process import write_config

    workspace = tmp_path / "workspace"
    (workspace / "memory").mkdir(parents=True)
    (workspace / "memory" / "2025-03-14.md").write_text(DAILY, encoding="utf-8")
    storage = {"url": request.getfixturevalue("pg_url")} if kind == "postgres" else {}
    path = str(write_config(tmp_path, {"storage": storage}))
    config = load_config(path, env={}, channels=CHANNELS)

    def krill(*argv: str) -> int:
        # The CLI's own parser and handler, without main()'s process-wide logging set-up.
        args = build_parser().parse_args([*argv, "--config", path])
        return SUBCOMMANDS[args.command](config, args)

    assert krill("memory", "reindex") == 0
    assert "indexed 1 file(s)" in capsys.readouterr().out
    assert krill("memory", "search", "dentist") == 0
    out = capsys.readouterr().out
    assert out.startswith("memory/2025-03-14.md#L3-L3") and "dentist" in out
    assert krill("memory", "search", "zzzqqq") == 0
    assert "no memory matches" in capsys.readouterr().out
    assert krill("memory", "search") == 1


def test_comments_are_not_memory_but_keep_line_numbers() -> None:
    text = "# Memory\n<!--\nexplains\nthe file\n-->\n- Alice likes tea\n<!-- inline -->"
    (chunk,) = chunk_text(text, chunk_tokens=400, overlap_tokens=80)
    assert "explains" not in chunk.text and "inline" not in chunk.text
    assert chunk.text.split("\n")[5] == "- Alice likes tea"


async def test_a_forced_reindex_reports_progress_file_by_file(index: MemoryIndex) -> None:
    seen: list[tuple[int, int]] = []
    report = await index.refresh(
        force=True, progress=lambda done, total: seen.append((done, total))
    )
    assert len(report.indexed) == 3  # MEMORY.md and the two daily notes
    assert seen == [(1, 3), (2, 3), (3, 3)]
