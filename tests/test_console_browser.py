"""The operator console in a real browser (Debian's headless Chromium via selenium) against
the real `krill run` and the loopback fakes: log in, see a chat's session with its cost,
open its transcript, edit SOUL.md and see the next model request carry it, be refused when
the file changed on disk, search memory, approve a pairing and see that person answered and
their photo loaded as a thumbnail; see the overview row, people's and chats' names beside
their keys, a failing channel's state and last problem, the data folder's sizes, the log's
warnings, and the pending reminders and scheduled jobs. Every page is photographed at
1280x800 and 390x844 (test-artifacts/console/) and must not scroll sideways at either size."""

from __future__ import annotations

import asyncio
import io
import re
import time
from collections.abc import Callable
from pathlib import Path

from PIL import Image
from selenium.common.exceptions import NoSuchElementException
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement

from bot.store.sqlite import SQLiteStore
from bot.types import Address
from tests.channel_env import channel_config, start_channel_krill
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.slack import FakeSlack
from tests.fakes.telegram import FakeTelegram
from tests.krill_process import KrillProcess
from tests.test_e2e_local import model_env, plain_echo
from tests.test_webchat_browser import Browser, browser_at  # noqa: F401 (a fixture)

TOKEN = "console-Token_4711-long-enough"
ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts" / "console"
SIZES = ((1280, 800), (390, 844))
PAGES = {
    "sessions": "/admin",
    "session": "/admin/session?key=agent:main:local:direct:alice",
    "workspace": "/admin/workspace",
    "editor": "/admin/workspace/edit?path=SOUL.md",
    "memory": "/admin/memory?q=blue+door",
    "costs": "/admin/costs",
    "pairings": "/admin/pairings",
    "health": "/admin/health",
}
OVERFLOW_JS = "return [document.documentElement.scrollWidth, window.innerWidth]"
CODE_RE = re.compile(r"code is ([A-Z0-9]{8})")


def reef() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (300, 200), (20, 140, 200)).save(out, "PNG")
    return out.getvalue()


def log_in(browser: Browser, base: str) -> None:
    browser.driver.get(f"{base}/admin")
    browser.driver.find_element(By.CSS_SELECTOR, "[data-testid=login-token]").send_keys(TOKEN)
    browser.driver.find_element(By.CSS_SELECTOR, "[data-testid=login-submit]").click()
    browser.wait_for(lambda: browser.driver.title.startswith("Sessions"), "the sessions page")


def by_testid(browser: Browser, name: str) -> list[WebElement]:
    return list(browser.driver.find_elements(By.CSS_SELECTOR, f"[data-testid={name}]"))


def photograph_every_page(
    browser: Browser, base: str, pages: dict[str, str] = PAGES, prefix: str = ""
) -> dict[str, tuple[int, int]]:
    """Visit each page at each size; returns page@size -> (scroll width, window width)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    widths = {}
    for width, height in SIZES:
        browser.driver.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600},
        )
        for name, path in pages.items():
            browser.driver.get(f"{base}{path}")
            browser.wait_for(lambda: browser.driver.find_elements(By.TAG_NAME, "h1"), name)
            browser.driver.save_screenshot(str(ARTIFACTS / f"{width}x{height}-{prefix}{name}.png"))
            scroll, inner = browser.driver.execute_script(OVERFLOW_JS)
            widths[f"{name}@{width}"] = (int(scroll), int(inner))
    return widths


async def test_operator_sees_sessions_edits_the_soul_and_every_page_fits(
    tmp_path: Path,
    fake_anthropic: FakeAnthropic,
    browser_at: Callable[[tuple[int, int]], Browser],  # noqa: F811
) -> None:
    fake_anthropic.default_handler = plain_echo
    config = {"admin": {"console_token": TOKEN}}
    async with KrillProcess(tmp_path, config, model_env(fake_anthropic)) as krill:
        # After start-up, which copies the bundled workspace into an absent folder only.
        notes = tmp_path / "workspace" / "memory" / "shared"
        notes.mkdir(parents=True)
        (notes / "doors.md").write_text("# Doors\n\nThe blue door code is 4711.\n")
        # A link out of the workspace: listed (and photographed) as not editable.
        (tmp_path / "elsewhere.md").write_text("not the console's\n")
        (tmp_path / "workspace" / "ELSEWHERE-WITH-A-LONG-NAME.md").symlink_to(
            tmp_path / "elsewhere.md"
        )
        await krill.chat("hello from alice", user="alice")
        browser = await asyncio.to_thread(browser_at, SIZES[0])
        await asyncio.to_thread(log_in, browser, krill.url)

        rows = await asyncio.to_thread(by_testid, browser, "session-row")
        row_text = await asyncio.to_thread(lambda: rows[0].text)
        await asyncio.to_thread(lambda: by_testid(browser, "session-link")[0].click())
        entries = await asyncio.to_thread(
            browser.wait_for, lambda: by_testid(browser, "transcript-entry"), "transcript entries"
        )
        entry_texts = await asyncio.to_thread(lambda: [e.text for e in entries])

        # Edit SOUL.md: the next turn's system prompt carries the new text.
        await asyncio.to_thread(browser.driver.get, f"{krill.url}/admin/workspace")
        links = await asyncio.to_thread(by_testid, browser, "file-link")
        soul = next(link for link in links if link.get_attribute("data-path") == "SOUL.md")
        await asyncio.to_thread(soul.click)
        editor = await asyncio.to_thread(
            browser.wait_for, lambda: by_testid(browser, "file-editor"), "the editor"
        )
        await asyncio.to_thread(editor[0].clear)
        await asyncio.to_thread(editor[0].send_keys, "You speak like a pirate captain.")
        await asyncio.to_thread(lambda: by_testid(browser, "file-save")[0].click())
        await asyncio.to_thread(
            browser.wait_for,
            lambda: "Saved" in browser.driver.find_element(By.TAG_NAME, "main").text,
            "the save",
        )
        await krill.chat("who are you?", user="alice")
        system = fake_anthropic.message_requests[-1].system_text

        # Someone edits the file on the host while the editor is open: saving is refused.
        await asyncio.to_thread(browser.driver.refresh)
        (tmp_path / "workspace" / "SOUL.md").write_text("Edited on the host.\n")
        editor = await asyncio.to_thread(by_testid, browser, "file-editor")
        await asyncio.to_thread(editor[0].send_keys, " And a poet.")
        await asyncio.to_thread(lambda: by_testid(browser, "file-save")[0].click())
        refusal = await asyncio.to_thread(
            browser.wait_for,
            lambda: browser.driver.find_element(By.CSS_SELECTOR, ".notice.error").text,
            "the refusal",
        )
        kept = await asyncio.to_thread(
            lambda: by_testid(browser, "file-editor")[0].get_attribute("value")
        )

        # Memory: a search as the model would, with score and scope.
        await asyncio.to_thread(browser.driver.get, f"{krill.url}/admin/memory")
        query = await asyncio.to_thread(by_testid, browser, "memory-query")
        await asyncio.to_thread(query[0].send_keys, "blue door\n")
        hits = await asyncio.to_thread(
            browser.wait_for, lambda: by_testid(browser, "memory-result"), "memory results"
        )
        hit_text = await asyncio.to_thread(lambda: hits[0].text)

        widths = await asyncio.to_thread(photograph_every_page, browser, krill.url)

    assert "agent:main:local:direct:alice" in row_text
    assert re.search(r"\$0\.\d*[1-9]", row_text), row_text  # a cost, and not zero
    assert any("hello from alice" in text for text in entry_texts)
    assert any("echo: hello from alice" in text for text in entry_texts)
    assert "You speak like a pirate captain." in system
    assert "changed on disk" in refusal
    assert kept is not None and "And a poet." in kept
    assert (tmp_path / "workspace" / "SOUL.md").read_text() == "Edited on the host.\n"
    assert "memory/shared/doors.md" in hit_text and "shared" in hit_text
    overflowing = {page: w for page, w in widths.items() if w[0] > w[1]}
    assert not overflowing, overflowing


async def test_approving_a_pairing_in_the_console_lets_that_person_in(
    tmp_path: Path,
    fake_anthropic: FakeAnthropic,
    fake_telegram: FakeTelegram,
    browser_at: Callable[[tuple[int, int]], Browser],  # noqa: F811
) -> None:
    fake_anthropic.default_handler = plain_echo
    stranger = 5150
    async with FakeSlack() as slack:
        config = channel_config(
            fake_telegram,
            slack,
            telegram={"dm_policy": "pairing"},
            admin={"console_token": TOKEN},
        )
        env = await start_channel_krill(tmp_path, fake_telegram, slack, fake_anthropic, config)
        try:
            await env.telegram(fake_telegram.private_message(stranger, "let me in"))
            code = CODE_RE.findall(await env.telegram_reply(stranger, "code is"))[0]
            browser = await asyncio.to_thread(browser_at, SIZES[1])
            await asyncio.to_thread(log_in, browser, env.krill.url)
            await asyncio.to_thread(browser.driver.get, f"{env.krill.url}/admin/pairings")
            listed = await asyncio.to_thread(
                lambda: browser.driver.find_element(By.TAG_NAME, "main").text
            )
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            shot = str(ARTIFACTS / "390x844-pairings-pending.png")
            await asyncio.to_thread(browser.driver.save_screenshot, shot)
            scroll, inner = await asyncio.to_thread(browser.driver.execute_script, OVERFLOW_JS)
            await asyncio.to_thread(lambda: by_testid(browser, "pairing-approve")[0].click())
            said = await asyncio.to_thread(
                browser.wait_for,
                lambda: browser.driver.find_element(By.CSS_SELECTOR, ".notice").text,
                "the decision",
            )
            await env.telegram(fake_telegram.private_message(stranger, "hello at last"))
            answer = await env.telegram_reply(stranger, "echo: hello at last")

            # The photo they send shows in their transcript as a loaded thumbnail.
            await env.telegram(
                fake_telegram.photo_message(stranger, stranger, caption="my reef", data=reef())
            )
            await env.telegram_reply(stranger, "my reef")
            session = f"{env.krill.url}/admin/session?key=agent:main:telegram:direct:{stranger}"
            await asyncio.to_thread(browser.driver.get, session)
            thumbs = await asyncio.to_thread(
                browser.wait_for, lambda: by_testid(browser, "media-thumb"), "the thumbnail"
            )
            loaded = await asyncio.to_thread(
                browser.wait_for,
                lambda: browser.driver.execute_script(
                    "return arguments[0].complete && arguments[0].naturalWidth", thumbs[0]
                ),
                "the thumbnail's bytes",
            )
            await asyncio.to_thread(
                browser.driver.execute_script, "arguments[0].scrollIntoView()", thumbs[0]
            )
            await asyncio.to_thread(
                browser.driver.save_screenshot, str(ARTIFACTS / "390x844-session-media.png")
            )
        finally:
            await env.krill.stop()
    assert code in listed and f"telegram:{stranger}" in listed
    assert scroll <= inner
    assert f"approved telegram:{stranger}" in said
    assert answer
    assert loaded == 300  # the prepared image, fetched with the login cookie


OPERATIONS = {
    "overview": "/admin",
    "health": "/admin/health",
    "reminders": "/admin/reminders",
    "jobs": "/admin/jobs",
}


def texts(browser: Browser, name: str) -> list[str]:
    return [element.text for element in by_testid(browser, name)]


def read_operations(browser: Browser, base: str) -> dict[str, object]:
    """What a person sees on each page, photographed at both sizes."""
    seen: dict[str, object] = {"widths": photograph_every_page(browser, base, OPERATIONS, "ops-")}
    browser.driver.get(f"{base}/admin")
    seen["overview"] = {
        key: by_testid(browser, f"overview-{key}")[0].text
        for key in ("version", "uptime", "turns", "errors", "p50", "p95")
    }
    seen["names"] = {
        row.get_attribute("data-key"): _name_in(row) for row in by_testid(browser, "session-row")
    }
    browser.driver.get(f"{base}/admin/health")
    log_rows = by_testid(browser, "log-row")
    if log_rows:
        browser.driver.execute_script("arguments[0].scrollIntoView()", log_rows[0])
    browser.driver.save_screenshot(str(ARTIFACTS / f"{SIZES[1][0]}x{SIZES[1][1]}-ops-log.png"))
    seen["channels"] = {
        row.find_elements(By.TAG_NAME, "td")[0].text: [
            td.text for td in row.find_elements(By.TAG_NAME, "td")[1:]
        ]
        for row in by_testid(browser, "channel-row")
    }
    seen["data"] = texts(browser, "data-row")
    seen["log"] = texts(browser, "log-row")
    browser.driver.get(f"{base}/admin/reminders")
    seen["reminders"] = texts(browser, "reminder-row")
    browser.driver.get(f"{base}/admin/jobs")
    seen["jobs"] = texts(browser, "job-row")
    return seen


def _name_in(row: WebElement) -> str:
    try:
        return str(row.find_element(By.CSS_SELECTOR, "[data-testid=session-name]").text)
    except NoSuchElementException:
        return ""


async def test_operator_sees_names_health_log_reminders_and_jobs(
    tmp_path: Path,
    fake_anthropic: FakeAnthropic,
    browser_at: Callable[[tuple[int, int]], Browser],  # noqa: F811
) -> None:
    fake_anthropic.default_handler = plain_echo
    # Long polls end within a second, so the failure below meets the next one.
    async with FakeTelegram(max_poll_timeout=1.0) as tg, FakeSlack() as slack:
        config = channel_config(
            tg,
            slack,
            telegram_mode="polling",
            admin={"console_token": TOKEN},
        )
        env = await start_channel_krill(tmp_path, tg, slack, fake_anthropic, config)
        try:
            # Two turns, from a person and a group whose names the console shows.
            tg.push_update(tg.private_message(811, "hi", first_name="Ada", last_name="Lovelace"))
            await env.telegram_reply(811, "echo: hi")
            tg.push_update(
                tg.group_message(-100812, 813, "status?", mention=True, title="Ops room")
            )
            await env.telegram_reply(-100812, "echo: status?")
            # A reminder and a scheduled job, set beside the running Krill.
            store = SQLiteStore(tmp_path / "data" / "krill.db")
            await store.open()
            try:
                now = time.time()
                await store.reminder_add(
                    session_key="agent:main:telegram:direct:811",
                    address=Address("telegram", "811"),
                    creator="telegram:811",
                    due_at=now + 3600,
                    text="feed the analytical engine",
                    created_at=now,
                )
                await store.schedule_add(
                    session_key="agent:main:telegram:group:-100812",
                    address=Address("telegram", "-100812"),
                    creator="telegram:813",
                    creator_name="Grace",
                    name="standup",
                    task="Post the morning standup prompt",
                    cron="0 9 * * 1-5",
                    timezone="UTC",
                    next_run_at=now + 7200,
                    created_at=now,
                )
            finally:
                await store.close()
            # Telegram starts failing: its row shows the problem, the log the warning.
            tg.fail_next("getUpdates", 502, "Bad Gateway", times=1_000)
            await env.log_line("Telegram polling failed")
            browser = await asyncio.to_thread(browser_at, SIZES[0])
            await asyncio.to_thread(log_in, browser, env.krill.url)
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            seen = await asyncio.to_thread(read_operations, browser, env.krill.url)
        finally:
            await env.krill.stop()
    overview = seen["overview"]
    assert isinstance(overview, dict)
    assert overview["turns"] == "2" and overview["errors"] == "0%", overview
    assert re.fullmatch(r"\d+\.\d+\.\d+.*", overview["version"]), overview
    assert re.fullmatch(r"0:0\d:\d\d", overview["uptime"]), overview
    assert all(re.fullmatch(r"\d+\.\d s", overview[k]) for k in ("p50", "p95")), overview
    assert seen["names"] == {
        "agent:main:telegram:direct:811": "Ada Lovelace",
        "agent:main:telegram:group:-100812": "Ops room",
    }
    channels = seen["channels"]
    assert isinstance(channels, dict)
    assert (
        "Telegram polling failed" in channels["telegram"][2]
        and "Bad Gateway" in channels["telegram"][2]
    )
    assert channels["slack"][0] == "up" and channels["slack"][2] == ""
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d", row[1]) for row in channels.values())
    data = " | ".join(seen["data"])  # type: ignore[arg-type]
    assert all(kind in data for kind in ("database", "media", "tool results", "workspace"))
    log = seen["log"]
    assert isinstance(log, list) and any("Telegram polling failed" in line for line in log)
    (reminder,) = seen["reminders"]  # type: ignore[misc]
    assert "feed the analytical engine" in reminder and "telegram:811" in reminder
    (job,) = seen["jobs"]  # type: ignore[misc]
    assert "standup" in job and "At 09:00, Monday through Friday (UTC)" in job
    widths = seen["widths"]
    assert isinstance(widths, dict)
    overflowing = {page: w for page, w in widths.items() if w[0] > w[1]}
    assert not overflowing, overflowing
