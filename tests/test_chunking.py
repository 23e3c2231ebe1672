"""The shared chunker, with the measures the platforms pass: packing, cutting a paragraph
(where, and with its styles carried across the cut), and lone style markers."""

from __future__ import annotations

from channels.chunking import attach_lone_markers, hard_split, pack, split_paragraph


def within(limit: int):
    return lambda text: len(text) <= limit


def test_pack_joins_greedily_and_keeps_order() -> None:
    assert pack(["aa", "bb", "cc", "dd"], "\n", within(5)) == ["aa\nbb", "cc\ndd"]
    assert pack([], "\n", within(5)) == []


def test_a_piece_too_big_for_any_chunk_stands_alone() -> None:
    assert pack(["a", "toolong", "b"], " ", within(3)) == ["a", "toolong", "b"]


def test_the_measure_decides_what_fits() -> None:
    two_units = lambda text: len(text.encode("utf-16-le")) // 2 <= 4  # noqa: E731
    assert pack(["😀", "😀", "😀"], "", two_units) == ["😀😀", "😀"]


def test_hard_split_cuts_at_whitespace_when_it_can() -> None:
    assert list(hard_split("alpha beta gamma", within(11))) == ["alpha beta", "gamma"]
    assert list(hard_split("abcdefgh", within(3))) == ["abc", "def", "gh"]
    assert list(hard_split("short", within(10))) == ["short"]


def test_hard_split_prefers_a_break_outside_parentheses() -> None:
    line = "one two three four (five six seven eight) nine ten"
    parts = list(hard_split(line, within(30)))
    assert parts[0] == "one two three four"
    assert parts[1].startswith("(five six seven eight)")


def test_a_style_cut_in_two_is_closed_and_reopened() -> None:
    assert split_paragraph("**bold and ~~struck words~~ then bold** plain", within(24)) == [
        "**bold and ~~struck~~**",
        "**~~words~~ then bold**",
        "plain",
    ]
    assert split_paragraph("- **item one two three four five**", within(18)) == [
        "- **item one two**",  # reopened after the list marker of the line it starts
        "**three four**",
        "**five**",
    ]


def test_styles_are_what_a_markdown_parser_reads_not_every_star() -> None:
    # `2**10` opens nothing; the bold that follows is the one carried.
    text = "x 2**10 y word word word **bold across the boundary here**"
    parts = split_paragraph(text, within(30))
    assert parts == ["x 2**10 y word word word", "**bold across the boundary**", "**here**"]
    # Bold italic, and italic written either way, come through whole.
    assert split_paragraph("***bold italic across the boundary***", within(20)) == [
        "***bold italic***",
        "***across the***",
        "***boundary***",
    ]
    assert split_paragraph("_italic across the boundary_ and *more italic here*", within(20)) == [
        "_italic across the_",
        "_boundary_ and",
        "*more italic here*",
    ]
    # Markers in inline code are code, and the code is not cut.
    assert split_paragraph("see `**not bold** here` and then more words", within(24)) == [
        "see `**not bold** here`",
        "and then more words",
    ]


def test_a_short_aside_is_not_cut_even_across_a_line_break() -> None:
    text = "one two three four\n(five six\nseven) eight nine ten"
    assert split_paragraph(text, within(30)) == [
        "one two three four",
        "(five six\nseven) eight nine",
        "ten",
    ]
    # One too long to move whole is cut like any text.
    long_aside = "intro (" + "word " * 60 + "end) tail"
    assert all(len(part) <= 40 for part in split_paragraph(long_aside, within(40)))


def test_a_lone_marker_line_styles_the_paragraph_it_closes() -> None:
    assert attach_lone_markers("**A\nA\n**") == "**A\nA**"
    assert attach_lone_markers("**\nbold\n**") == "**bold**"
    assert attach_lone_markers("no opener\n**") == "no opener\n**"
    assert attach_lone_markers("***\nrule above") == "***\nrule above"  # a thematic break
