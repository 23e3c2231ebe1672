"""The console shows data only escaped: `<script>` fed through every data field a console
page shows (session keys and channels, people's and chats' names, transcript text of every
entry kind, file names and transcripts of received media, workspace file names, memory
snippets, pairing names, dead chunks, scheduled jobs, and the query parameters pages echo)
never reaches a page as markup, against the real `krill run`. And the pages are built so
that it cannot: `Markup` is only ever made from literal markup, so data reaches a page
through escaping `format`, `+` and `join`."""

from __future__ import annotations

import ast
import time
from pathlib import Path

import aiohttp
from markupsafe import escape

from bot.store.base import Pairing, PairingStatus
from bot.store.names import NameKey, NameKind
from bot.store.outbox_rows import OutboxChunk
from bot.store.schedules import RunRecord
from bot.store.sqlite import SQLiteStore
from bot.transcript import (
    AssistantReply,
    ChatLine,
    Command,
    Compaction,
    Entry,
    InternalPrompt,
    MediaForm,
    MediaRef,
    MemoryFlushRecord,
    PersonTurn,
    PromptPurpose,
    Reset,
    ToolResults,
)
from bot.types import Address, ChatType, SessionOrigin, Usage
from tests.entries import cost
from tests.fakes.telegram import FakeTelegram
from tests.krill_process import KrillProcess

TOKEN = "console-Token_4711-tide-table"
BEARER = {"Authorization": f"Bearer {TOKEN}"}
OWN_SCRIPT = '<script src="/admin/static/console.js" defer></script>'
CONSOLE = Path(__file__).resolve().parent.parent / "bot" / "console"


def evil(field: str) -> str:
    return f"<script>{field}</script>"


KEY = f"agent:main:local:direct:{evil('key')}"
# A file name cannot hold "/": an opening tag is markup enough.
NOTE = "memory/<script>tide.md"
# A link out of the workspace: listed as "not editable", with its name.
OUTSIDE = "memory/<script>outside.md"
SHA = "ab" * 32


def transcript(session_id: str) -> list[Entry]:
    media = (
        MediaRef(MediaForm.IMAGE, evil("image-name"), "image/png", 10, SHA, 40, 30),
        MediaRef(MediaForm.TRANSCRIPT, evil("voice-name"), evil("mime"), 5, text=evil("voice")),
        MediaRef(MediaForm.NOTE, evil("file-name"), note=evil("file-note")),
    )
    said = ChatLine("m1", "local", evil("user-id"), evil("text"), 1.0, evil("user-name"), "", media)
    tool_use = {"type": "tool_use", "id": "t1", "name": evil("tool"), "input": {"q": evil("input")}}
    result = {"type": "tool_result", "tool_use_id": "t1", "content": evil("result")}
    payloads = [
        PersonTurn([said], [evil("context")]),
        InternalPrompt(evil("prompt"), PromptPurpose.REMINDER),
        AssistantReply([{"type": "text", "text": evil("reply")}, tool_use]),  # type: ignore[list-item]
        ToolResults([result]),  # type: ignore[list-item]
        Compaction(evil("summary"), "", evil("compaction-reason")),
        MemoryFlushRecord(evil("flush-reason"), ok=False, error=evil("flush-error")),
        Command("status", evil("args"), evil("principal")),
        Reset(evil("reset-reason"), evil("next-session")),
    ]
    return [Entry(session_id, payload) for payload in payloads]


async def seed(database: Path) -> None:
    database.parent.mkdir(parents=True)
    store = SQLiteStore(database)
    await store.open()
    try:
        origin = SessionOrigin(evil("channel"), ChatType.DIRECT, "c1", peer_id="p1")
        session = await store.get_or_create_session(KEY, origin)
        # The person's name, shown beside the key on the list and the session's page.
        await store.name_put(NameKey(evil("channel"), NameKind.PERSON, "p1"), evil("name"), at=1.0)
        await store.append_entries(transcript(session.session_id))
        usage = Usage(input_tokens=100, output_tokens=20)
        now = time.time()
        line = cost(session.session_id, 0.01, at=now)
        await store.add_usage(session.session_id, usage, context_tokens=120, cost=line, at=now)
        pairing = Pairing("telegram", evil("pairing-id"), "ABCD2345", PairingStatus.PENDING, now)
        pairing.user_name = evil("pairing-name")
        await store.pairing_put(pairing)
        chunk = OutboxChunk(evil("dead-turn"), 0, 1, Address("telegram", evil("dead-chat")), "hi")
        await store.outbox_add([chunk], now)
        (row,) = await store.outbox_heads(["telegram"])
        await store.outbox_mark_dead(row.id, evil("dead-reason"), "", now)
        job = await store.schedule_add(
            session_key=KEY,
            address=Address("local", evil("job-chat")),
            creator=evil("job-creator"),
            creator_name=evil("job-creator-name"),
            name=evil("job-name"),
            task=evil("job-task"),
            cron="0 9 * * *",
            timezone="UTC",
            next_run_at=now + 3600,
            created_at=now,
        )
        ran = RunRecord(job.next_run_at, job.next_run_at + 86400, evil("job-outcome"))
        await store.schedule_record_run(job.id, ran)
    finally:
        await store.close()


async def test_data_reaches_every_console_page_escaped(
    tmp_path: Path, fake_telegram: FakeTelegram
) -> None:
    await seed(tmp_path / "data" / "krill.db")
    telegram = {"enabled": True, "token": fake_telegram.token, "api_base_url": fake_telegram.url}
    config = {"admin": {"console_token": TOKEN}, "telegram": telegram}
    pages: dict[str, str] = {}
    async with KrillProcess(tmp_path, config) as krill, aiohttp.ClientSession() as http:
        # A warning carrying the platform's words: the Health page's channel row and Log.
        fake_telegram.fail_next("getUpdates", 502, evil("log-error"))
        fake_telegram.push_update(fake_telegram.private_message(7, "hello"))
        await krill.logged("Telegram polling failed")
        note = tmp_path / "workspace" / NOTE
        note.write_text(f"The {evil('snippet')} tides turn at noon.\n", encoding="utf-8")
        (tmp_path / "elsewhere.md").write_text("not the workspace's\n", encoding="utf-8")
        (tmp_path / "workspace" / OUTSIDE).symlink_to(tmp_path / "elsewhere.md")
        gets = {
            "sessions": ("/admin", {}),
            "sessions filtered": ("/admin", {"q": evil("filter"), "channel": evil("chosen")}),
            "session": ("/admin/session", {"key": KEY, "said": evil("said")}),
            "workspace": ("/admin/workspace", {}),
            "editor": ("/admin/workspace/edit", {"path": NOTE}),
            "memory": ("/admin/memory", {"q": "tides"}),
            "memory as": ("/admin/memory", {"q": evil("query"), "as": evil("as")}),
            "pairings": ("/admin/pairings", {"said": evil("pairings-said")}),
            "health": ("/admin/health", {"said": evil("health-said")}),
            "jobs": ("/admin/jobs", {"said": evil("jobs-said")}),
        }
        for name, (path, params) in gets.items():
            async with http.get(krill.url + path, params=params, headers=BEARER) as resp:
                assert resp.status == 200, (name, await resp.text())
                pages[name] = await resp.text()
        login = {"next": f"/admin?{evil('next')}"}
        async with http.get(f"{krill.url}/admin/login", params=login) as resp:
            pages["login"] = await resp.text()
        preview = {"text": evil("preview")}
        async with http.post(
            f"{krill.url}/admin/workspace/preview",
            data=preview,
            headers=BEARER | {"Origin": krill.url},
        ) as resp:
            pages["preview"] = await resp.text()
    raw = [name for name, text in pages.items() if "<script" in text.replace(OWN_SCRIPT, "")]
    assert raw == [], f"raw <script> on: {raw}"
    shown = "\n".join(pages.values())
    fields = [
        *("key", "channel", "filter", "said", "text", "user-name", "context"),
        *("image-name", "voice-name", "mime", "voice", "file-name", "file-note", "prompt"),
        *("reply", "tool", "result", "summary", "compaction-reason", "flush-reason"),
        *("flush-error", "args", "principal", "reset-reason", "next-session", "snippet"),
        *("query", "as", "pairing-id", "pairing-name", "pairings-said", "dead-turn"),
        *("dead-chat", "dead-reason", "health-said", "preview", "job-name", "job-task"),
        *("job-creator", "job-outcome", "jobs-said", "log-error", "name"),
    ]
    assert (
        str(escape(evil("name"))) in pages["sessions"]
        and str(escape(evil("name"))) in pages["session"]
    )
    assert [f for f in fields if str(escape(evil(f))) not in shown] == []
    assert str(escape(evil("input"))).replace("&#34;", "") in shown.replace("&#34;", "")
    assert str(escape("<script>tide.md")) in pages["workspace"] + pages["editor"]
    assert str(escape(OUTSIDE)) in pages["workspace"]
    assert "not editable" in pages["workspace"]


def _literal(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    return isinstance(node, ast.BinOp) and _literal(node.left) and _literal(node.right)


def test_markup_is_only_made_from_literal_markup() -> None:
    """`Markup(x)` trusts x: only a literal may be trusted, so no data skips escaping. The
    one exception is the markdown preview, whose renderer escapes the text itself."""
    trusted = []
    for path in sorted(CONSOLE.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "Markup"
                and not all(_literal(arg) for arg in node.args)
            ):
                trusted.append(f"{path.name}: {ast.unparse(node)}")
    assert trusted == [
        "workspace_pages.py: Markup(MarkdownIt('commonmark', {'html': False}).render(text))"
    ]
