"""Replies as the web chat shows them: the model's Markdown turned into HTML that is safe to
insert into the page.

The model's text is untrusted (a fetched page can steer it), so raw HTML in it is escaped,
links keep only web and mail schemes and open in a new tab without a referrer, and images
stay links: an image would be fetched by the browser on sight and could carry data away.
"""

from __future__ import annotations

from collections.abc import Sequence

from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict

SAFE_SCHEMES = ("http:", "https:", "mailto:")


class _SafeMarkdown(MarkdownIt):
    def __init__(self) -> None:
        super().__init__("commonmark", {"html": False, "linkify": False, "breaks": True})
        self.enable(["table", "strikethrough"])
        self.disable("image")
        self.add_render_rule("link_open", _link_open)

    def validateLink(self, url: str) -> bool:
        """Only absolute http(s) and mailto links, or links within this page."""
        url = url.strip().lower()
        return url.startswith(SAFE_SCHEMES) or url.startswith("#")


def _link_open(
    renderer: RendererHTML,
    tokens: Sequence[Token],
    idx: int,
    options: OptionsDict,
    env: EnvType,
) -> str:
    tokens[idx].attrSet("target", "_blank")
    tokens[idx].attrSet("rel", "noopener noreferrer nofollow")
    return str(renderer.renderToken(tokens, idx, options, env))


_MARKDOWN = _SafeMarkdown()


def to_html(markdown: str) -> str:
    """`markdown` as HTML fit for the chat page; nothing in it can run script or load media."""
    return _MARKDOWN.render(markdown)
