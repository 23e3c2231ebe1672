"""An Anthropic-shaped request as Chat Completions messages and tools (pure functions).

- system blocks become one system message; `cache_control` markers are dropped (these
  providers cache a repeated prefix by themselves, and Krill's prefix is byte-stable);
- tool definitions become functions; server-side tools (Anthropic's web search) have no
  counterpart and are left out;
- an assistant's `tool_use` blocks become `tool_calls`, a person's `tool_result` blocks
  become `tool` messages (placed before the rest of that person's message, as the API
  requires);
- images become data URLs, or a note for a model that cannot see images; PDF documents
  become their extracted text (inside an untrusted block), or a note when no text can be
  read from them; anything else a provider cannot take becomes a note saying so.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import json
import logging
from collections.abc import Callable, Iterable
from typing import Any, cast

from anthropic.types import MessageParam, TextBlockParam, ToolUnionParam
from openai.types.chat import ChatCompletionMessageParam, ChatCompletionToolParam

from bot.untrusted import marker_id_for, wrap_untrusted

log = logging.getLogger(__name__)

IMAGE_NOTE = "[An image was sent here, but {model} cannot see images; ask for a description.]"
PDF_NOTE = "[A PDF document was sent here, but no text could be read from it ({why}).]"
TOOL_IMAGE_NOTE = "[The tool returned an image, which {model} cannot be shown here.]"
DROPPED_NOTE = "[A {kind} block was left out: {model} cannot take it.]"
# Blocks of Anthropic's own server-side tools and reasoning: nothing to translate them to,
# and the reply's text already says what came of them.
SILENT_BLOCKS = frozenset(
    {"server_tool_use", "web_search_tool_result", "thinking", "redacted_thinking"}
)

# Reads a PDF's text (bytes -> text); raises ValueError when there is none to read.
PdfReader = Callable[[bytes], str]


def pdf_text(data: bytes, max_chars: int) -> str:
    """The text of a PDF's pages, cut at `max_chars`; ValueError when it has none (a scan)."""
    from pypdf import PdfReader as Reader
    from pypdf.errors import PdfReadError

    try:
        pages = [page.extract_text() or "" for page in Reader(io.BytesIO(data)).pages]
    except (PdfReadError, OSError, KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"it could not be read: {type(exc).__name__}") from exc
    text = "\n\n".join(p.strip() for p in pages if p.strip())
    if not text:
        raise ValueError("it has no text layer; it may be a scan")
    return text if len(text) <= max_chars else text[:max_chars] + "\n[… cut here]"


class ChatTranslator:
    """Translates requests for one model of an OpenAI-style provider."""

    def __init__(self, *, model: str, images: bool, read_pdf: PdfReader) -> None:
        self.model = model
        self.images = images
        self.read_pdf = read_pdf

    def messages(
        self, system: list[TextBlockParam], messages: list[MessageParam]
    ) -> list[ChatCompletionMessageParam]:
        out: list[ChatCompletionMessageParam] = []
        prompt = "\n\n".join(b["text"] for b in system if b.get("text"))
        if prompt:
            out.append({"role": "system", "content": prompt})
        for message in messages:
            content = message["content"]
            blocks: list[Any] = (
                [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
            )
            if message["role"] == "assistant":
                out.append(self._assistant(blocks))
            else:
                out += self._user(blocks)
        return out

    def _assistant(self, blocks: list[Any]) -> ChatCompletionMessageParam:
        text = "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
        calls = [
            {
                "id": b["id"],
                "type": "function",
                "function": {"name": b["name"], "arguments": json.dumps(b.get("input") or {})},
            }
            for b in blocks
            if b.get("type") == "tool_use"
        ]
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if calls:
            message["tool_calls"] = calls
        return cast(ChatCompletionMessageParam, message)

    def _user(self, blocks: list[Any]) -> list[ChatCompletionMessageParam]:
        results = [b for b in blocks if b.get("type") == "tool_result"]
        out: list[ChatCompletionMessageParam] = [
            {
                "role": "tool",
                "tool_call_id": b["tool_use_id"],
                "content": self._result_text(b),
            }
            for b in results
        ]
        parts = [p for b in blocks if b.get("type") != "tool_result" for p in self._parts(b)]
        if parts:
            # One plain string where there is only text: every server takes that.
            if all(p["type"] == "text" for p in parts):
                out.append({"role": "user", "content": "\n\n".join(p["text"] for p in parts)})
            else:
                out.append(cast(ChatCompletionMessageParam, {"role": "user", "content": parts}))
        return out

    def _result_text(self, block: Any) -> str:
        content = block.get("content")
        if isinstance(content, str):
            text = content
        else:
            pieces = []
            for part in content or []:
                if part.get("type") == "text":
                    pieces.append(part.get("text", ""))
                elif part.get("type") == "image":
                    pieces.append(TOOL_IMAGE_NOTE.format(model=self.model))
            text = "\n".join(pieces)
        return f"Error: {text}" if block.get("is_error") and text else text

    def _parts(self, block: Any) -> list[dict[str, Any]]:
        kind = block.get("type")
        if kind == "text":
            return [{"type": "text", "text": block.get("text", "")}]
        if kind == "image":
            return [self._image(block.get("source") or {})]
        if kind == "document":
            return [{"type": "text", "text": self._document(block.get("source") or {})}]
        if kind in SILENT_BLOCKS:
            return []
        return [{"type": "text", "text": DROPPED_NOTE.format(kind=kind, model=self.model)}]

    def _image(self, source: dict[str, Any]) -> dict[str, Any]:
        if not self.images:
            return {"type": "text", "text": IMAGE_NOTE.format(model=self.model)}
        if source.get("type") == "base64":
            url = f"data:{source.get('media_type')};base64,{source.get('data', '')}"
        else:
            url = str(source.get("url", ""))
        return {"type": "image_url", "image_url": {"url": url}}

    def _document(self, source: dict[str, Any]) -> str:
        if source.get("type") == "text":
            return str(source.get("data", ""))
        if source.get("type") != "base64":
            return PDF_NOTE.format(why="it was not sent as a file")
        try:
            data = base64.b64decode(source.get("data", ""), validate=True)
            text = self.read_pdf(data)
        except (ValueError, binascii.Error) as exc:
            return PDF_NOTE.format(why=str(exc) or "it could not be read")
        # Keyed by the file, so the same document reads the same in every request (the
        # provider's prefix cache) and the marker cannot appear inside it (sanitized).
        marker = marker_id_for(hashlib.sha256(data).hexdigest())
        meta = {"type": "application/pdf", "note": "text extracted from the PDF"}
        return wrap_untrusted(text, source="file", marker_id=marker, meta=meta)


def chat_tools(tools: Iterable[ToolUnionParam]) -> list[ChatCompletionToolParam]:
    """Tool definitions as functions; server tools (no input schema) are left out."""
    out: list[ChatCompletionToolParam] = []
    for tool in tools:
        schema = tool.get("input_schema")
        if schema is None:
            continue
        function: dict[str, Any] = {"name": tool.get("name"), "parameters": schema}
        if tool.get("description"):
            function["description"] = tool.get("description")
        out.append(cast(ChatCompletionToolParam, {"type": "function", "function": function}))
    return out
