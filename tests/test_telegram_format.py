"""Markdown -> Telegram: entity conversion and splitting replies under the message limit."""

from __future__ import annotations

import re

from telegram import MessageEntity

from channels.telegram.format import (
    MAX_MESSAGE_UNITS,
    literal_html,
    plain_fallback,
    rendered_units,
    split_blocks,
    split_markdown,
    to_telegram,
)
from tests.fakes.telegram import utf16_len

FENCE = re.compile(r"^ {0,3}(```|~~~)")


def fence_lines(chunk: str) -> int:
    return sum(1 for line in chunk.split("\n") if FENCE.match(line))


def test_bold_code_and_link_become_entities_without_markup() -> None:
    text, entities = to_telegram("**Hi** `x` [site](https://example.org)")
    assert text == "Hi x site"
    kinds = {(e.type, e.offset, e.length) for e in entities}
    assert (MessageEntity.BOLD, 0, 2) in kinds
    assert (MessageEntity.CODE, 3, 1) in kinds
    link = next(e for e in entities if e.type == MessageEntity.TEXT_LINK)
    assert link.url == "https://example.org"


def test_entity_offsets_count_utf16_units() -> None:
    text, entities = to_telegram("😀 **bold**")
    bold = next(e for e in entities if e.type == MessageEntity.BOLD)
    assert bold.offset == 3  # the emoji is two UTF-16 units, then a space
    assert text[2:] == "bold"


def test_code_block_keeps_language_and_needs_no_escaping() -> None:
    text, entities = to_telegram("```python\nprint('a_b*c')\n```")
    assert text == "print('a_b*c')"
    assert entities[0].type == MessageEntity.PRE
    assert entities[0].language == "python"


def test_raw_html_is_shown_as_typed_not_dropped() -> None:
    text, _ = to_telegram("Use Vec<String> or <details> here, and `<b>` in code")
    assert text == "Use Vec<String> or <details> here, and <b> in code"
    # Inside code nothing is escaped.
    assert literal_html("`<b>`") == "`<b>`"
    assert literal_html("```\n<div>\n```") == "```\n<div>\n```"


def test_markdown_that_renders_to_nothing_is_sent_raw() -> None:
    assert to_telegram("\\<br>")[0] == "<br>"
    assert to_telegram("![](https://example.org/x.png)")[0].strip() != ""


def test_plain_fallback_prefers_raw_markdown_when_it_fits() -> None:
    assert plain_fallback("**hi** [x](https://e.org)", "hi x") == "**hi** [x](https://e.org)"
    long_md = "[x](https://e.org/" + "a" * 5000 + ")"
    assert plain_fallback(long_md, "x") == "x"


def test_short_reply_is_one_chunk_and_blank_is_none() -> None:
    assert split_markdown("Hello **there**") == ["Hello **there**"]
    assert split_markdown("") == []
    assert split_markdown(" \n\n \n") == []


def test_blocks_split_on_blank_lines_but_not_inside_code() -> None:
    md = "one\ntwo\n\n```\na\n\nb\n```\n\nthree"
    assert split_blocks(md) == ["one\ntwo", "```\na\n\nb\n```", "three"]


def test_long_prose_splits_between_paragraphs() -> None:
    paragraphs = [f"Paragraph {i}:" + " word" * 150 for i in range(30)]
    chunks = split_markdown("\n\n".join(paragraphs))
    assert len(chunks) > 1
    for chunk in chunks:
        assert rendered_units(chunk) <= MAX_MESSAGE_UNITS
        # Every chunk is made of whole paragraphs.
        assert all(part in paragraphs for part in chunk.split("\n\n"))
    assert "\n\n".join(chunks) == "\n\n".join(paragraphs)


def test_long_code_block_is_closed_and_reopened_with_its_language() -> None:
    lines = [f"print({i})  # " + "x" * 40 for i in range(400)]
    md = "Here is the script:\n\n```python\n" + "\n".join(lines) + "\n```\n\nThat is all."
    chunks = split_markdown(md)
    assert len(chunks) >= 4
    seen: list[str] = []
    for chunk in chunks:
        assert rendered_units(chunk) <= MAX_MESSAGE_UNITS
        assert fence_lines(chunk) % 2 == 0, chunk[:80]
        _text, entities = to_telegram(chunk)
        code = [e for e in entities if e.type == MessageEntity.PRE]
        if "print(" in chunk:
            assert code and code[0].language == "python"
        seen += [line for line in chunk.split("\n") if line.startswith("print(")]
    assert seen == lines  # nothing lost, nothing repeated, order kept


def test_overlong_single_line_is_cut_at_spaces() -> None:
    line = " ".join(f"w{i}" for i in range(3000))
    chunks = split_markdown(line)
    assert len(chunks) >= 3
    assert all(rendered_units(c) <= MAX_MESSAGE_UNITS for c in chunks)
    assert " ".join(chunks).split() == line.split()


def test_astral_characters_count_double() -> None:
    chunks = split_markdown("😀" * 3000)  # 6,000 UTF-16 units
    assert [utf16_len(to_telegram(c)[0]) for c in chunks] == [4096, 1904]


def test_tables_render_within_the_limit() -> None:
    rows = "\n".join(f"| {i} | {'v' * 30} |" for i in range(300))
    chunks = split_markdown("| n | value |\n|---|---|\n" + rows)
    assert all(rendered_units(c) <= MAX_MESSAGE_UNITS for c in chunks)


def test_file_names_are_set_as_code_so_telegram_does_not_link_them() -> None:
    text, entities = to_telegram(
        "Edit README.md, then run scripts/backup.sh. See https://x.com/a.sh and `x.py`."
    )
    code = {text[e.offset : e.offset + e.length] for e in entities if e.type == "code"}
    assert code == {"README.md", "scripts/backup.sh", "x.py"}


def test_file_names_inside_links_or_bold_are_left_alone() -> None:
    _, entities = to_telegram("🦐 [the README.md](https://e.org) **notes.md** and a@b.md")
    assert [e.type for e in entities] == ["text_link", "bold"]
    # Offsets after an astral emoji count UTF-16 units.
    _, later = to_telegram("🦐 see setup.py")
    assert (later[0].type, later[0].offset, later[0].length) == ("code", 7, 8)


def test_bold_cut_across_chunks_stays_bold_in_both() -> None:
    words = " ".join(f"word{i}" for i in range(400))
    chunks = split_markdown(f"**{words}**", limit=1000)
    assert len(chunks) > 1
    for chunk in chunks:
        text, entities = to_telegram(chunk)
        assert "*" not in text
        assert [(e.type, e.offset, e.length) for e in entities] == [("bold", 0, len(text))]


def test_a_stray_marker_is_not_carried_past_a_paragraph_break() -> None:
    first = "2**3 is eight " + "x " * 400
    second = "```python\n" + "print(1)\n" * 20 + "```"
    chunks = split_markdown(f"{first}\n\n{second}", limit=900)
    assert [c.strip() for c in chunks] == [first.strip(), second]


def styles(chunk: str) -> list[tuple[str, int, int]]:
    _, entities = to_telegram(chunk)
    return [(e.type, e.offset, e.length) for e in entities if e.type != MessageEntity.CODE]


def test_bold_over_many_lines_stays_bold_in_every_chunk() -> None:
    # OpenClaw's vector: bold around 2,500 short lines, the closing marker on its own line.
    chunks = split_markdown("**" + "A\n" * 2500 + "**")
    assert len(chunks) == 2
    for chunk in chunks:
        text, _ = to_telegram(chunk)
        assert styles(chunk) == [("bold", 0, utf16_len(text))]
        assert "*" not in text


def test_only_real_styles_are_carried_across_a_cut() -> None:
    # `2**10` is no bold; the bold after it is, and it is the one both chunks show.
    prefix = "Powers: 2**10 is 1024. " + "Filler words here. " * 40
    bold = "**" + "a bold sentence that runs across the cut " * 3 + "end**"
    chunks = split_markdown(prefix + bold, 900)
    assert len(chunks) == 2
    first, second = (to_telegram(chunk)[0] for chunk in chunks)
    assert "2**10" in first  # shown as typed, not as bold
    start = first.index("a bold")
    assert styles(chunks[0]) == [("bold", start, len(first) - start)]
    assert styles(chunks[1]) == [("bold", 0, len(second))]


def test_bold_italic_keeps_both_styles_in_both_chunks() -> None:
    chunks = split_markdown("***" + "emphatic words " * 120 + "end***", 1000)
    assert len(chunks) == 2
    for chunk in chunks:
        text, _ = to_telegram(chunk)
        assert sorted(styles(chunk)) == [("bold", 0, len(text)), ("italic", 0, len(text))]


def test_a_parenthetical_is_not_split_across_chunks() -> None:
    aside = "(an aside that would straddle\nthe chunk boundary)"
    for words in range(180, 200, 3):
        chunks = split_markdown("word " * words + aside + " and more" * 10, 1000)
        assert len(chunks) == 2
        assert any(aside in chunk for chunk in chunks)  # whole, its line break kept
