"""The workspace pages: the markdown files with their size against the prompt caps, and an
editor with a rendered preview. Saving is atomic and takes effect on the next turn (the
prompt re-reads a file whose mtime or size changed); a file changed on disk since it was
opened is not overwritten, and the operator's text comes back with the refusal."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from aiohttp import web
from markdown_it import MarkdownIt
from markupsafe import Markup

from bot.console import workspace_files as files
from bot.console.layout import count, join, notice, page, url
from bot.console.workspace_files import ChangedOnDisk, FileText, NotSaved, PathRefused


class PromptShares(Protocol):
    file_max_chars: int
    total_max_chars: int

    def prompt_shares(self) -> dict[str, tuple[int, int]]: ...


def render_markdown(text: str) -> Markup:
    """The preview: CommonMark with raw HTML shown as text and unsafe links dropped. The
    renderer escapes the text itself, so its output is markup."""
    return Markup(MarkdownIt("commonmark", {"html": False}).render(text))


class WorkspacePages:
    def __init__(self, workspace: PromptShares, root: Path) -> None:
        self.workspace = workspace
        self.root = root

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/admin/workspace", self.index),
            web.get("/admin/workspace/edit", self.edit),
            web.post("/admin/workspace/save", self.save),
            web.post("/admin/workspace/preview", self.preview),
        ]

    def _caps(self, name: str, shares: dict[str, tuple[int, int]]) -> Markup | str:
        if name in shares:
            size, kept = shares[name]
            cap = self.workspace.file_max_chars
            if kept == 0 and size:
                return Markup('<span class="warn">left out: the prompt total cap is used up</span>')
            if kept < size:
                return Markup('<span class="warn">truncated to {} chars</span>').format(count(kept))
            return f"in the prompt ({count(size)} of {count(cap)} chars)"
        if name.startswith("memory/"):
            return "memory note: searched, not in the prompt"
        if name == "HEARTBEAT.md":
            return "read by the heartbeat"
        return "not part of the prompt"

    async def index(self, request: web.Request) -> web.Response:
        root = self.root
        shares = self.workspace.prompt_shares()
        rows = []
        for listed in files.list_markdown(root):
            name = listed.name
            if listed.refusal:
                rows.append(
                    Markup(
                        '<tr><td>{}</td><td></td><td><span class="warn">not editable: {}</span>'
                        "</td></tr>"
                    ).format(name, listed.refusal)
                )
                continue
            rows.append(
                Markup(
                    '<tr><td><a href="{link}" data-testid="file-link" data-path="{name}">{name}</a>'
                    "</td><td>{size} bytes</td><td>{caps}</td></tr>"
                ).format(
                    link=url("/admin/workspace/edit", path=name),
                    name=name,
                    size=count(listed.size),
                    caps=self._caps(name, shares),
                )
            )
        total = sum(kept for _, kept in shares.values())
        body = Markup(
            "<p>Caps: {} chars a file, {} in all (now {}).</p>"
            '<div class="table-wrap"><table><thead><tr><th>File</th><th>Size</th>'
            "<th>Prompt</th></tr></thead><tbody>{}</tbody></table></div>"
        ).format(
            count(self.workspace.file_max_chars),
            count(self.workspace.total_max_chars),
            count(total),
            join(rows),
        )
        return page("Workspace", body, active="workspace")

    def _editor(
        self, opened: FileText, text: str, message: str = "", *, status: int = 200
    ) -> web.Response:
        """The editor over `text`; saving it replaces `opened.version` only."""
        kind = "error" if status >= 400 else "info"
        body = Markup(
            '{notice}<p class="key">{name}</p>'
            '<div class="editor"><form method="post" action="/admin/workspace/save" '
            'id="file-form">'
            '<input type="hidden" name="path" value="{name}">'
            '<input type="hidden" name="version" value="{version}">'
            '<textarea name="text" data-testid="file-editor" spellcheck="false">{text}'
            "</textarea>"
            '<div class="actions"><button data-testid="file-save">Save</button>'
            '<button type="button" id="preview-button">Preview</button></div></form>'
            '<div class="preview" id="preview">{preview}</div></div>'
        ).format(
            notice=notice(message, kind=kind) if message else "",
            name=opened.name,
            version=opened.version,
            text=text,
            preview=render_markdown(text),
        )
        return page(f"Edit {opened.name}", body, active="workspace", status=status)

    async def edit(self, request: web.Request) -> web.Response:
        try:
            opened = files.read(self.root, request.query.get("path", ""))
        except PathRefused as exc:
            return page("Workspace", notice(str(exc), kind="error"), status=400)
        saved = "Saved; the next turn uses it." if request.query.get("saved") == "1" else ""
        return self._editor(opened, opened.text, saved)

    async def save(self, request: web.Request) -> web.Response:
        form = await request.post()
        name, text = str(form.get("path", "")), str(form.get("text", ""))
        # On a refusal the form keeps the version first opened (so after a change on disk,
        # saving again is refused again), and the operator's text comes back.
        kept = FileText(name, text, str(form.get("version", "")))
        try:
            files.save(self.root, name, text, kept.version)
        except PathRefused as exc:
            return page("Workspace", notice(str(exc), kind="error"), status=400)
        except NotSaved as exc:
            message = (
                f"Not saved: the disk refused it ({exc}); {name} is unchanged. Your text is "
                "below: free some space (or fix the folder's permissions), then save again."
            )
            return self._editor(kept, text, message, status=409)
        except ChangedOnDisk:
            message = (
                f"Not saved: {name} changed on disk since you opened it. Your text is below; "
                "copy what you need, then reopen the file to edit the new version."
            )
            return self._editor(kept, text, message, status=409)
        raise web.HTTPSeeOther(url("/admin/workspace/edit", path=name, saved="1"))

    async def preview(self, request: web.Request) -> web.Response:
        form = await request.post()
        text = str(form.get("text", ""))
        return web.Response(text=str(render_markdown(text)), content_type="text/html")
