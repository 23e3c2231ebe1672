"""The operator console over HTTP against the real `krill run` and the fake model: off
without a token, 401 without one, wrong tokens rate-limited and never echoed or logged,
cross-origin and origin-less cookie POSTs refused, the session list and JSONL export, paths
outside the workspace refused, a save over a file changed on disk refused, and a Telegram
photo and voice note shown in the transcript with the photo served only for its session."""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import re
import time
from pathlib import Path

import aiohttp
import pytest
from PIL import Image

from bot.store.base import ReminderStatus
from bot.store.sqlite import SQLiteStore
from bot.types import Address
from bot.wrong_tokens import PER_ADDRESS
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.telegram import FakeTelegram
from tests.fakes.transcription import FakeTranscription
from tests.krill_process import KrillProcess
from tests.test_e2e_local import model_env, plain_echo

TOKEN = "console-Token_4711-long-enough"
BEARER = {"Authorization": f"Bearer {TOKEN}"}


def console_config() -> dict[str, dict[str, str]]:
    return {"admin": {"console_token": TOKEN}}


async def test_console_is_off_without_a_token(tmp_path: Path) -> None:
    async with KrillProcess(tmp_path, {}) as krill:
        status, text = await krill.get("/admin")
    assert status == 404
    assert "admin.console_token" in text and "KRILL_ADMIN_TOKEN" in text


async def test_token_from_the_environment_and_refusals(tmp_path: Path) -> None:
    async with (
        KrillProcess(tmp_path, {}, {"KRILL_ADMIN_TOKEN": TOKEN}) as krill,
        aiohttp.ClientSession() as http,
    ):
        async with http.get(f"{krill.url}/admin") as resp:
            assert resp.status == 401
            assert TOKEN not in await resp.text()
        async with http.get(f"{krill.url}/admin", headers=BEARER) as resp:
            assert resp.status == 200
            page = await resp.text()
        statuses = []
        for _ in range(PER_ADDRESS + 1):
            wrong = {"Authorization": "Bearer nope"}
            async with http.get(f"{krill.url}/admin", headers=wrong) as resp:
                statuses.append(resp.status)
        # The right token is never locked out by wrong ones, not even the client's own.
        async with http.get(f"{krill.url}/admin", headers=BEARER) as resp:
            after = resp.status
        log = krill.log()
    assert "Sessions" in page and TOKEN not in page
    assert statuses == [401] * PER_ADDRESS + [429]
    assert after == 200
    assert TOKEN not in log


async def test_cookie_posts_need_this_servers_origin(tmp_path: Path) -> None:
    async with (
        KrillProcess(tmp_path, console_config()) as krill,
        aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http,  # an IP host
    ):
        origin = {"Origin": krill.url}
        async with http.post(
            f"{krill.url}/admin/login", data={"token": TOKEN}, headers=origin, allow_redirects=False
        ) as resp:
            assert resp.status == 303
            cookie = resp.cookies["krill_admin"]
            assert cookie["httponly"] and cookie["samesite"] == "Strict"
            assert TOKEN not in cookie.value
        form = {"channel": "telegram", "code": "ABCDEFGH", "decision": "approve"}
        decide = f"{krill.url}/admin/pairings/decide"
        async with http.post(
            decide, data=form, headers={"Origin": "http://evil.example"}, allow_redirects=False
        ) as resp:
            foreign = resp.status
        async with http.post(decide, data=form, allow_redirects=False) as resp:
            no_origin = resp.status
        async with http.post(decide, data=form, headers=origin, allow_redirects=False) as resp:
            same = resp.status
        async with http.get(f"{krill.url}/admin/pairings") as resp:
            listed = resp.status
    assert (foreign, no_origin, same, listed) == (403, 403, 303, 200)


async def test_sessions_export_and_workspace_guards(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.default_handler = plain_echo
    env = model_env(fake_anthropic)
    outside = tmp_path / "outside.md"
    outside.write_text("secret")
    async with (
        KrillProcess(tmp_path, console_config(), env) as krill,
        aiohttp.ClientSession(headers=BEARER) as http,
    ):
        await krill.chat("count the krill", user="alice")
        async with http.get(f"{krill.url}/admin?q=alice") as resp:
            sessions = await resp.text()
        key = "agent:main:local:direct:alice"
        async with http.get(f"{krill.url}/admin/session/export", params={"key": key}) as resp:
            records = [json.loads(line) for line in (await resp.text()).splitlines()]
        (tmp_path / "workspace" / "memory").mkdir(exist_ok=True)
        (tmp_path / "workspace" / "memory" / "link.md").symlink_to(outside)
        refused = []
        for path in ("../outside.md", "/etc/passwd.md", "memory/link.md", "krill.toml"):
            async with http.get(f"{krill.url}/admin/workspace/edit", params={"path": path}) as r:
                refused.append(r.status)
        async with http.post(
            f"{krill.url}/admin/workspace/save",
            data={"path": "../outside.md", "text": "overwritten", "version": ""},
        ) as resp:
            refused.append(resp.status)
        soul = tmp_path / "workspace" / "SOUL.md"
        before = soul.read_text()
        soul.write_text("edited on the host\n")
        async with http.post(
            f"{krill.url}/admin/workspace/save",
            data={"path": "SOUL.md", "text": "from the console", "version": "stale"},
        ) as resp:
            conflict, conflict_page = resp.status, await resp.text()
    assert 'data-testid="session-row"' in sessions and key in sessions
    assert "$0.0000<" not in sessions  # the chat cost something
    kinds = [r["kind"] for r in records]
    assert kinds[:2] == ["person_turn", "assistant_reply"]
    assert records[0]["payload"]["messages"][0]["text"] == "count the krill"
    assert refused == [400, 400, 400, 400, 400]
    assert outside.read_text() == "secret"
    assert conflict == 409 and "changed on disk" in conflict_page
    assert "from the console" in conflict_page  # the operator's text is not lost
    assert soul.read_text() == "edited on the host\n" != before


@pytest.mark.parametrize("path", ["/admin/workspace", "/admin/memory", "/admin/health"])
async def test_every_page_needs_the_token(tmp_path: Path, path: str) -> None:
    async with KrillProcess(tmp_path, console_config()) as krill:
        status, text = await krill.get(path)
    assert status == 401 and "log in" in text.lower()


async def test_reset_from_the_console_starts_a_new_session_and_keeps_the_old(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.default_handler = plain_echo
    key = "agent:main:local:direct:bob"
    async with (
        KrillProcess(tmp_path, console_config(), model_env(fake_anthropic)) as krill,
        aiohttp.ClientSession(headers=BEARER) as http,
    ):
        await krill.chat("remember the reef", user="bob")
        async with http.post(f"{krill.url}/admin/session/reset", data={"key": key}) as resp:
            after_reset = await resp.text()
        async with http.post(f"{krill.url}/admin/session/compact", data={"key": key}) as resp:
            compact_status = resp.status
        async with http.get(f"{krill.url}/admin/session/export", params={"key": key}) as resp:
            records = [json.loads(line) for line in (await resp.text()).splitlines()]
    assert "new session" in after_reset and "Other sessions of this key" in after_reset
    assert compact_status == 200
    assert [r["kind"] for r in records if r["kind"] == "reset"] == ["reset"]


async def test_memory_search_as_a_session_sees_only_that_sessions_scope(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.default_handler = plain_echo
    async with (
        KrillProcess(tmp_path, console_config(), model_env(fake_anthropic)) as krill,
        aiohttp.ClientSession(headers=BEARER) as http,
    ):
        await krill.chat("hi", user="alice")
        bob = tmp_path / "workspace" / "memory" / "people" / "local-bob"
        bob.mkdir(parents=True)
        (bob / "2026-01-01.md").write_text("Bob keeps the coral key under the reef.\n")
        search = f"{krill.url}/admin/memory"
        async with http.get(search, params={"q": "coral key"}) as resp:
            everything = await resp.text()
        params = {"q": "coral key", "as": "agent:main:local:direct:alice"}
        async with http.get(search, params=params) as resp:
            as_alice = await resp.text()
        async with http.post(
            f"{krill.url}/admin/session/compact", data={"key": "agent:main:local:direct:nobody"}
        ) as resp:
            unknown = resp.status
    assert 'data-testid="memory-result"' in everything and "person local-bob" in everything
    assert 'data-testid="memory-result"' not in as_alice and "Nothing found" in as_alice
    assert unknown == 404


async def test_a_sessions_photo_is_a_thumbnail_served_only_for_that_session(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.default_handler = plain_echo
    photo = io.BytesIO()
    Image.new("RGB", (400, 200), (30, 120, 220)).save(photo, "PNG")
    async with FakeTelegram() as tg, FakeTranscription() as speech:
        config = console_config() | {
            "telegram": {
                "enabled": True,
                "token": tg.token,
                "api_base_url": tg.url,
                "dm_policy": "open",
            },
            "transcription": {"base_url": speech.url},
        }
        env = model_env(fake_anthropic) | {"TRANSCRIPTION_API_KEY": speech.api_key}
        speech.default_text = "the reef is blue today"
        async with (
            KrillProcess(tmp_path, config, env) as krill,
            aiohttp.ClientSession() as http,
        ):
            tg.push_update(tg.photo_message(801, 801, caption="look", data=photo.getvalue()))
            await tg.wait_for("sendMessage", predicate=lambda p: "look" in p["text"], timeout=15)
            tg.push_update(tg.voice_message(801, 801))
            await tg.wait_for("sendMessage", predicate=lambda p: "reef" in p["text"], timeout=15)
            await krill.chat("hello", user="carol")  # another session
            key = "agent:main:telegram:direct:801"
            async with http.get(
                f"{krill.url}/admin/session", params={"key": key}, headers=BEARER
            ) as resp:
                page = await resp.text()
            async with http.get(
                f"{krill.url}/admin/session",
                params={"key": "agent:main:local:direct:carol"},
                headers=BEARER,
            ) as resp:
                other_page = await resp.text()
            thumb = re.search(r'<img src="([^"]+)"[^>]*data-testid="media-thumb"', page)
            assert thumb is not None, page
            src = thumb.group(1)
            async with http.get(f"{krill.url}{src}", headers=BEARER) as resp:
                served = resp.status, resp.content_type, resp.headers["Cache-Control"]
                data = await resp.read()
            async with http.get(f"{krill.url}{src}") as resp:
                anonymous = resp.status
            sha = src.split("/")[-1].split("?")[0]
            other_id = re.search(r"<dt>Session</dt><dd>(\w+)", other_page)
            assert other_id is not None
            refused = []
            for path, session in (
                (f"/admin/media/{sha}", other_id.group(1)),  # a real session that never saw it
                (f"/admin/media/{hashlib.sha256(b'x').hexdigest()}", src.split("session=")[1]),
                ("/admin/media/..%2F..%2Fkrill.toml", src.split("session=")[1]),
            ):
                params = {"session": session}
                async with http.get(f"{krill.url}{path}", params=params, headers=BEARER) as resp:
                    refused.append(resp.status)
    assert re.search(r'alt="[^"]+" width="160" height="80" loading="lazy"', page), page
    assert served == (200, "image/jpeg", "private, max-age=3600")  # re-encoded, EXIF gone
    with Image.open(io.BytesIO(data)) as image:
        assert image.size == (400, 200)
    assert anonymous == 401
    assert refused == [404, 404, 400]
    assert 'data-testid="media-file"' in page and "the reef is blue today" in page
    assert 'data-testid="media-thumb"' not in other_page


async def test_health_page_shows_the_data_folders_size_by_kind(tmp_path: Path) -> None:
    async with (
        KrillProcess(tmp_path, console_config()) as krill,
        aiohttp.ClientSession(headers=BEARER) as http,
    ):
        photo = tmp_path / "data" / "media" / "cd" / ("cd" + "0" * 62)
        photo.parent.mkdir(parents=True, exist_ok=True)
        photo.write_bytes(b"p" * 4_000)
        async with http.get(f"{krill.url}/admin/health") as resp:
            assert resp.status == 200
            text = await resp.text()
    rows = re.findall(r'<tr data-testid="data-row"><td>([^<]*)</td><td>([^<]*)</td>', text)
    sizes = dict(rows)
    assert list(sizes) == ["database", "media", "tool results", "workspace"]
    assert sizes["media"] == "4 kB" and sizes["tool results"] == "0 bytes"
    assert sizes["database"] != "0 bytes" and sizes["workspace"] != "0 bytes"


async def test_reminders_page_lists_the_pending_reminders(tmp_path: Path) -> None:
    async with (
        KrillProcess(tmp_path, console_config()) as krill,
        aiohttp.ClientSession(headers=BEARER) as http,
    ):
        async with http.get(f"{krill.url}/admin/reminders") as resp:
            assert "No pending reminders." in await resp.text()
        store = SQLiteStore(tmp_path / "data" / "krill.db")  # beside the running Krill
        await store.open()
        try:
            for text in ("water the <b>plants</b>", "call Bo"):
                await store.reminder_add(
                    session_key="agent:main:telegram:direct:42", address=Address("telegram", "42"),
                    creator="telegram:42", due_at=time.time() + 3600, text=text,
                    created_at=time.time(),
                )  # fmt: skip
            (bo,) = [r for r in await store.reminders() if r.text == "call Bo"]
            await store.reminder_finish(bo.id, ReminderStatus.CANCELLED, at=time.time())
        finally:
            await store.close()
        async with http.get(f"{krill.url}/admin/reminders") as resp:
            assert resp.status == 200
            text = await resp.text()
    (row,) = re.findall(r'<tr data-testid="reminder-row">(.*?)</tr>', text)
    assert "water the &lt;b&gt;plants&lt;/b&gt;" in row and "telegram:42" in row
    assert "agent:main:telegram:direct:42" in row and "call Bo" not in text
    assert '<a href="/admin/reminders" class=active>Reminders</a>' in text


async def test_health_page_shows_each_channels_state_since_and_last_problem_and_the_log(
    tmp_path: Path, fake_anthropic: FakeAnthropic, fake_telegram: FakeTelegram
) -> None:
    """A failing getUpdates shows beside the Telegram row and in the Log section, redacted
    as the log is: the bot token Telegram echoed back never reaches the page."""
    telegram = {"enabled": True, "token": fake_telegram.token, "api_base_url": fake_telegram.url}
    config = console_config() | {"telegram": telegram | {"dm_policy": "open"}}
    env = {"ANTHROPIC_API_KEY": "test", "ANTHROPIC_BASE_URL": fake_anthropic.url}
    async with (
        KrillProcess(tmp_path, config, env) as krill,
        aiohttp.ClientSession(headers=BEARER) as http,
    ):
        async with http.get(f"{krill.url}/admin/health") as resp:
            before = await resp.text()
        failure = f"Bad Gateway for {fake_telegram.token}"
        fake_telegram.fail_next("getUpdates", 502, failure, times=3)
        # End the long poll in flight, so the next getUpdates meets the failure.
        fake_telegram.push_update(fake_telegram.private_message(7, "hello"))
        for _ in range(200):
            async with http.get(f"{krill.url}/admin/health") as resp:
                text = await resp.text()
            if "Bad Gateway" in text:
                break
            await asyncio.sleep(0.05)
        log = krill.log()
    rows = dict(
        re.findall(
            r'<tr data-testid="channel-row"><td>([^<]*)</td>.*?'
            r'<td data-testid="channel-error">([^<]*)</td>',
            text,
        )
    )
    since = re.findall(r'<td data-testid="channel-since">([^<]*)</td>', before)
    assert "Telegram polling failed: network error: Bad Gateway for ***" in rows["telegram"], text
    assert rows["local"] == ""
    assert len(since) == 2 and all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d", s) for s in since)
    logged = re.findall(r'<tr data-testid="log-row">.*?<pre>([^<]*)</pre>', text, re.S)
    assert logged and "Telegram polling failed: network error: Bad Gateway for ***" in logged[0]
    assert fake_telegram.token not in text and fake_telegram.token not in log
    assert "Bad Gateway for" in log


def channel_rows(page: str) -> dict[str, tuple[str, str]]:
    """Each channel row's state and since, by channel name."""
    rows = re.findall(
        r'<tr data-testid="channel-row"><td>([^<]*)</td><td class="[^"]*">([^<]*)</td>'
        r'<td data-testid="channel-since">([^<]*)</td>',
        page,
    )
    return {name: (state, since) for name, state, since in rows}


async def test_a_channel_retrying_after_failures_says_so_and_since_when(
    tmp_path: Path, fake_anthropic: FakeAnthropic, fake_telegram: FakeTelegram
) -> None:
    """While getUpdates fails and polling retries (not stale yet) Telegram is "retrying",
    since its first failure, on the Health page and in /healthz (still 200); the next
    success makes it "up" again."""
    telegram = {"enabled": True, "token": fake_telegram.token, "api_base_url": fake_telegram.url}
    config = console_config() | {"telegram": telegram | {"dm_policy": "open"}}
    env = {"ANTHROPIC_API_KEY": "test", "ANTHROPIC_BASE_URL": fake_anthropic.url}

    async def health_until(state: str) -> tuple[str, str]:
        for _ in range(800):
            async with http.get(f"{krill.url}/admin/health") as resp:
                rows = channel_rows(await resp.text())
            if rows["telegram"][0] == state:
                return rows["telegram"]
            await asyncio.sleep(0.05)
        raise AssertionError(f"Telegram stayed {rows['telegram']}, never {state}")

    async with (
        KrillProcess(tmp_path, config, env) as krill,
        aiohttp.ClientSession(headers=BEARER) as http,
    ):
        assert (await health_until("up"))[0] == "up"
        failed_at = time.time()
        fake_telegram.fail_next("getUpdates", 502, "Bad Gateway", times=100_000)
        # End the long poll in flight, so the next getUpdates meets the failure.
        fake_telegram.push_update(fake_telegram.private_message(7, "hello"))
        _, since = await health_until("retrying")
        status, body = await krill.get("/healthz")
        fake_telegram.clear_failures()
        await health_until("up")
    assert status == 200 and json.loads(body)["channels"]["telegram"] == "retrying", body
    minute = "%Y-%m-%d %H:%M"  # the console's, in agent.timezone (UTC by default)
    assert time.strftime(minute, time.gmtime(failed_at)) <= since, since
    assert since <= time.strftime(minute, time.gmtime()), since


async def test_first_page_shows_the_overview_of_the_last_hours_turns(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    def overview(page: str) -> dict[str, str]:
        return dict(re.findall(r'data-testid="overview-([a-z0-9]+)">([^<]*)<', page))

    async with (
        KrillProcess(tmp_path, console_config(), model_env(fake_anthropic)) as krill,
        aiohttp.ClientSession(headers=BEARER) as http,
    ):
        async with http.get(f"{krill.url}/admin") as resp:
            before = overview(await resp.text())
        fake_anthropic.queue_text("first", delay=0.2)
        fake_anthropic.queue_text("second", delay=0.2)
        fake_anthropic.queue_error(400, "invalid_request_error", "no", should_retry=False)
        for text in ("one", "two", "three"):
            await krill.chat(text)
        async with http.get(f"{krill.url}/admin") as resp:
            after = overview(await resp.text())
    assert before["turns"] == "0" and before["p50"] == before["p95"] == "—"
    assert re.fullmatch(r"\d+\.\d+\.\d+.*", before["version"]), before
    assert re.fullmatch(r"0:00:\d\d", before["uptime"]), before
    assert after["turns"] == "3" and after["errors"] == "33%", after
    p50, p95 = (float(after[k].removesuffix(" s")) for k in ("p50", "p95"))
    assert 0.2 <= p50 <= p95, after
