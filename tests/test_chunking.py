"""The shared chunk packer, with the measures the platforms pass."""

from __future__ import annotations

from channels.chunking import carry_styles, hard_split, open_styles, pack


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


def test_open_styles_tracks_the_last_paragraph_outside_code() -> None:
    assert open_styles("**bold and ~~struck") == ["**", "~~"]
    assert open_styles("**closed** and `**code**` and \\*\\*escaped") == []
    assert open_styles("**open\n\nnew paragraph") == []
    assert open_styles("```\n**\n```\n__under") == ["__"]


def test_carry_styles_closes_and_reopens_across_chunks() -> None:
    chunks = ["**bold ~~both", "still both~~ bold** plain", "- **item", "rest** done"]
    assert carry_styles(chunks) == [
        "**bold ~~both~~**",
        "**~~still both~~ bold** plain",
        "- **item**",
        "**rest** done",
    ]
