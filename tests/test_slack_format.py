"""Pure Slack formatting: chunking Markdown under Slack's limits and the mrkdwn fallback."""

from __future__ import annotations

import pytest

from channels.slack.format import CHUNK_CHARS, MARKDOWN_TEXT_MAX, split_markdown, to_mrkdwn


def test_short_text_is_one_chunk() -> None:
    assert split_markdown("  hello **world**  ") == ["hello **world**"]
    assert split_markdown("") == []


def test_splits_on_paragraphs_under_limit() -> None:
    paragraphs = [f"paragraph {i} " + "x" * 900 for i in range(30)]
    chunks = split_markdown("\n\n".join(paragraphs))
    assert len(chunks) > 1
    assert all(len(c) <= CHUNK_CHARS <= MARKDOWN_TEXT_MAX for c in chunks)
    assert "\n\n".join(chunks) == "\n\n".join(paragraphs)  # nothing lost, cut at boundaries
    assert all(c.startswith("paragraph") for c in chunks)


def test_never_cuts_inside_a_code_block_that_fits() -> None:
    code = "```python\n" + "\n".join(f"print({i})" for i in range(300)) + "\n```"
    text = "intro " + "y" * 6000 + "\n\n" + code + "\n\noutro"
    chunks = split_markdown(text)
    assert any(c == code or c.startswith(code) for c in chunks)
    for chunk in chunks:
        assert chunk.count("```") % 2 == 0


def test_oversized_code_block_is_reopened_in_each_chunk() -> None:
    code = "```sql\n" + "\n".join(f"select {i};" for i in range(3000)) + "\n```"
    chunks = split_markdown(code, 4000)
    assert len(chunks) > 1
    for chunk in chunks:
        assert len(chunk) <= 4000
        assert chunk.startswith("```sql\n") and chunk.endswith("\n```")
    body = [line for c in chunks for line in c.split("\n") if not line.startswith("```")]
    assert body == [f"select {i};" for i in range(3000)]


def test_unterminated_fence_is_closed() -> None:
    chunks = split_markdown("look:\n\n```\ncode without end")
    assert chunks == ["look:\n\n```\ncode without end\n```"]


def test_long_line_without_breaks() -> None:
    chunks = split_markdown("word " * 5000, 1000)
    assert all(len(c) <= 1000 for c in chunks)
    assert " ".join(chunks).split() == ["word"] * 5000


def test_tiny_limit_rejected() -> None:
    with pytest.raises(ValueError):
        split_markdown("x", 5)


def test_mrkdwn_fallback() -> None:
    text = to_mrkdwn("**bold** & [docs](https://x.io)\n\n> quote\n\n```python\nif a < b: pass\n```")
    assert "*bold* &amp; <https://x.io|docs>" in text
    assert "> quote" in text
    assert "```\nif a &lt; b: pass\n```" in text  # language tag dropped, text escaped


def test_mrkdwn_fallback_keeps_slack_syntax() -> None:
    text = to_mrkdwn(
        "<@U0123ABC> and <#C0456|general>, <!here>: see <https://x.io/a?b=1&c=2|the docs> "
        "& compare a<b"
    )
    assert text == (
        "<@U0123ABC> and <#C0456|general>, <!here>: see <https://x.io/a?b=1&c=2|the docs> "
        "&amp; compare a&lt;b"
    )


def test_bold_split_across_chunks_is_reopened() -> None:
    chunks = split_markdown("**" + " ".join(["bold"] * 30) + "**", 60)
    assert len(chunks) > 1
    assert all(c.startswith("**") and c.endswith("**") for c in chunks)


def test_italic_and_asides_survive_a_cut() -> None:
    text = "_" + "slanted words " * 15 + "end_ and then (a short aside here) " + "tail " * 8
    chunks = split_markdown(text, 150)
    assert all(len(chunk) <= 150 for chunk in chunks)
    assert chunks[0].startswith("_") and chunks[0].endswith("_")
    assert chunks[1].startswith("_")
    assert any("(a short aside here)" in chunk for chunk in chunks)
