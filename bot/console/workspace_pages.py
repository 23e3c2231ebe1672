"""The workspace pages: the markdown files with their size against the prompt caps, and an
editor with a rendered preview. Saving is atomic and takes effect on the next turn (the
prompt re-reads a file whose mtime or size changed); a file changed on disk since it was
opened is not overwritten, and the operator's text comes back with the refusal."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from aiohttp import web
from markdown_it import MarkdownIt

from bot.console import workspace_files as files
from bot.console.layout import count, esc, notice, page, url
from bot.console.workspace_files import ChangedOnDisk, FileText, NotSaved, PathRefused


class PromptShares(Protocol):
    file_max_chars: int
    total_max_chars: int

    def prompt_shares(self) -> dict[str, tuple[int, int]]: ...


def render_markdown(text: str) -> str:
    """The preview: CommonMark with raw HTML shown as text and unsafe links dropped."""
    return MarkdownIt("commonmark", {"html": False}).render(text)


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

    def _caps(self, name: str, shares: dict[str, tuple[int, int]]) -> str:
        if name in shares:
            size, kept = shares[name]
            cap = self.workspace.file_max_chars
            if kept == 0 and size:
                return '<span class="warn">left out: the prompt total cap is used up</span>'
            if kept < size:
                return f'<span class="warn">truncated to {count(kept)} chars</span>'
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
                    f"<tr><td>{esc(name)}</td><td></td>"
                    f'<td><span class="warn">not editable: {esc(listed.refusal)}</span></td></tr>'
                )
                continue
            link = esc(url("/admin/workspace/edit", path=name))
            rows.append(
                f'<tr><td><a href="{link}" data-testid="file-link" data-path="{esc(name)}">'
                f"{esc(name)}</a></td><td>{count(listed.size)} bytes</td>"
                f"<td>{self._caps(name, shares)}</td></tr>"
            )
        total = sum(kept for _, kept in shares.values())
        body = (
            f"<p>Caps: {count(self.workspace.file_max_chars)} chars a file, "
            f"{count(self.workspace.total_max_chars)} in all (now {count(total)}).</p>"
            '<div class="table-wrap"><table><thead><tr><th>File</th><th>Size</th>'
            f"<th>Prompt</th></tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
        )
        return page("Workspace", body, active="workspace")

    def _editor(
        self, opened: FileText, text: str, message: str = "", *, status: int = 200
    ) -> web.Response:
        """The editor over `text`; saving it replaces `opened.version` only."""
        kind = "error" if status >= 400 else "info"
        body = (
            (notice(message, kind=kind) if message else "")
            + f'<p class="key">{esc(opened.name)}</p>'
            '<div class="editor"><form method="post" action="/admin/workspace/save" '
            'id="file-form">'
            f'<input type="hidden" name="path" value="{esc(opened.name)}">'
            f'<input type="hidden" name="version" value="{esc(opened.version)}">'
            f'<textarea name="text" data-testid="file-editor" spellcheck="false">{esc(text)}'
            "</textarea>"
            '<div class="actions"><button data-testid="file-save">Save</button>'
            '<button type="button" id="preview-button">Preview</button></div></form>'
            f'<div class="preview" id="preview">{render_markdown(text)}</div></div>'
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
        return web.Response(text=render_markdown(text), content_type="text/html")
