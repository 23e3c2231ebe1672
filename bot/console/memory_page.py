"""The memory page: search the index as the model would (from the view of everything, or of
one session's scope), with each hit's score and the scope it belongs to, and browse the
scopes of docs/contracts.md section 7 with their files."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from aiohttp import web
from markupsafe import Markup

from bot.console.layout import count, join, notice, page, url
from bot.memory.index import MemoryIndex
from bot.memory.paths import iter_memory_files
from bot.memory.scopes import GROUPS_DIR, PEOPLE_DIR, SHARED_DIR, scope_of, visible_scopes
from bot.store.base import SessionStore, VisiblePaths

EVERYTHING = ""


def scope_label(path: str) -> str:
    """The scope a memory file belongs to, e.g. "person telegram-42", "shared", "operator"."""
    for folder, kind in ((PEOPLE_DIR, "person"), (GROUPS_DIR, "group")):
        if path.startswith(f"{folder}/"):
            owner = path.removeprefix(f"{folder}/").split("/", 1)[0]
            return f"{kind} {owner}"
    if path.startswith(f"{SHARED_DIR}/"):
        return "shared"
    return "operator"


class MemoryPage:
    def __init__(self, *, index: MemoryIndex | None, sessions: SessionStore, root: Path) -> None:
        self.index = index
        self.sessions = sessions
        self.root = root

    def routes(self) -> list[web.RouteDef]:
        return [web.get("/admin/memory", self.view)]

    async def view(self, request: web.Request) -> web.Response:
        if self.index is None:
            return page(
                "Memory", notice("Memory is off (memory.enabled = false)."), active="memory"
            )
        query = request.query.get("q", "").strip()
        as_key = request.query.get("as", EVERYTHING)
        keys = sorted(s.session_key for s in await self.sessions.list_sessions(current_only=True))
        options = Markup('<option value="{}">everything (an admin\'s DM)</option>').format(
            EVERYTHING
        ) + join(
            Markup("<option{}>{}</option>").format(Markup(" selected") if k == as_key else "", k)
            for k in keys
        )
        form = Markup(
            '<form class="filter" method="get" action="/admin/memory">'
            '<input name="q" value="{}" placeholder="search memory" '
            'data-testid="memory-query" aria-label="search memory">'
            '<select name="as" aria-label="search as">{}</select>'
            "<button>Search</button></form>"
        ).format(query, options)
        results = await self._results(query, as_key) if query else Markup("")
        body = form + results + await self._scopes()
        return page("Memory", body, active="memory")

    async def _results(self, query: str, as_key: str) -> Markup:
        assert self.index is not None
        visible = VisiblePaths(everything=True)
        if as_key:
            session = await self.sessions.current_session(as_key)
            if session is None:
                return notice(f"no session with key {as_key}", kind="error")
            try:
                visible = visible_scopes(scope_of(session.origin, as_key), admin=False)
            except ValueError as exc:
                return notice(f"cannot tell the scope of {as_key}: {exc}", kind="error")
        hits = await self.index.search(query, visible)
        if not hits:
            return notice("Nothing found.")
        items = join(
            Markup(
                '<li data-testid="memory-result"><div class="meta"><b>{:.2f}</b> '
                '<a href="{}">{}</a> <span class=tag>{}</span></div>'
                '<div class="text">{}</div></li>'
            ).format(
                hit.score,
                url("/admin/workspace/edit", path=hit.path),
                hit.source,
                scope_label(hit.path),
                hit.text,
            )
            for hit in hits
        )
        return Markup('<ol class="hits">{}</ol>').format(items)

    async def _scopes(self) -> Markup:
        by_scope: dict[str, list[tuple[str, int]]] = defaultdict(list)
        for f in iter_memory_files(self.root):
            by_scope[scope_label(f.name)].append((f.name, f.size))
        if not by_scope:
            return Markup("<h2>Scopes</h2><p>No memory files yet.</p>")
        sections = []
        for scope in sorted(by_scope):
            names = sorted(by_scope[scope])
            links = join(
                Markup('<li><a href="{}">{}</a> {} bytes</li>').format(
                    url("/admin/workspace/edit", path=name), name, count(size)
                )
                for name, size in names
            )
            sections.append(
                Markup("<details><summary>{} ({} files)</summary><ul>{}</ul></details>").format(
                    scope, len(names), links
                )
            )
        return Markup("<h2>Scopes</h2>") + join(sections)
