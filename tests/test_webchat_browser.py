"""The web chat in a real browser: Debian's headless Chromium, driven with selenium, against
the real `krill run` and the fake model. Checks the layout at a desktop and a phone size
(screenshots land in test-artifacts/webchat/), replies rendered as safe Markdown, history
after a reload, and a message typed while disconnected sent once the server is back.

scripts/test-deps.sh (run by README's test command) installs chromium and chromium-driver;
without them these tests fail, naming the fix, rather than skip.
"""

from __future__ import annotations

import asyncio
import re
import shutil
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

from tests.fakes.anthropic import FakeAnthropic
from tests.krill_process import KrillProcess, free_port
from tests.test_e2e_local import model_env, plain_echo

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
CHROMIUM_FLAGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts" / "webchat"
DESKTOP = (1280, 720)
PHONE = (390, 844)
WAIT_SECONDS = 30.0
LONG_WORD = "unbroken" * 40  # 320 characters without a space

# Geometry the page must keep: nothing wider or taller than the window, the input inside it.
LAYOUT_JS = """
const d = document.documentElement, box = document.getElementById('text').getBoundingClientRect();
const widest = Math.max(0, ...[...document.querySelectorAll('.msg')].map(
    m => m.getBoundingClientRect().right));
return {scrollWidth: d.scrollWidth, scrollHeight: d.scrollHeight, innerWidth: innerWidth,
        innerHeight: innerHeight, widestBubble: widest,
        input: {top: box.top, left: box.left, bottom: box.bottom, right: box.right}};
"""
# Records whether a streamed (preview) reply bubble ever appeared.
WATCH_PREVIEWS_JS = """
window.sawPreview = false;
new MutationObserver(() => {
  if (document.querySelector('.bot.preview')) window.sawPreview = true;
}).observe(document.getElementById('log'), {subtree: true, childList: true, attributes: true});
"""

# What the page says under a message it could not send yet.
PENDING_NOTE_JS = (
    "return getComputedStyle(document.querySelector('.me.pending'), '::after').content"
)


def markdown_reply(body: dict[str, Any]) -> str:
    """A reply with the Markdown a model writes, raw HTML and a script link, and the echo."""
    said = plain_echo(body).removeprefix("echo: ")
    return (
        "**Noted.** Here is what I can do:\n\n- first item\n- second item\n\n"
        "```\nprint('hello')\n```\n\n"
        "See [the docs](https://example.com/docs) or [this](javascript:alert(1)). "
        "<img src=x onerror=alert(1)>\n\n"
        f"You said: {said}"
    )


class Browser:
    """A headless Chromium at a fixed viewport size. Its calls block, so tests run them in a
    thread (`await asyncio.to_thread(...)`): the fake model shares the test's event loop."""

    def __init__(self, profile: Path, size: tuple[int, int]) -> None:
        missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
        if missing:
            pytest.fail(
                f"browser tests need {', '.join(missing)}: run `bash scripts/test-deps.sh` "
                "(apt-get install chromium chromium-driver)"
            )
        options = webdriver.ChromeOptions()
        options.binary_location = str(CHROMIUM)
        for flag in CHROMIUM_FLAGS:
            options.add_argument(flag)
        options.add_argument(f"--user-data-dir={profile}")
        options.add_argument(f"--window-size={size[0]},{size[1]}")
        service = webdriver.ChromeService(executable_path=str(CHROMEDRIVER))
        self.driver = webdriver.Chrome(options=options, service=service)
        width, height = size
        self.driver.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600},
        )

    def open(self, url: str) -> None:
        self.driver.get(url)
        self.wait_for(lambda: self.state() == "connected", "the page to connect")

    def reload(self) -> None:
        self.driver.refresh()
        self.wait_for(lambda: self.state() == "connected", "the page to reconnect")

    def state(self) -> str:
        return str(self.driver.find_element(By.ID, "state").text)

    def wait_for(self, condition: Callable[[], object], what: str) -> Any:
        # A page that is being replaced (a form's redirect) leaves stale elements: not yet.
        wait = WebDriverWait(
            self.driver, WAIT_SECONDS, ignored_exceptions=(StaleElementReferenceException,)
        )
        return wait.until(lambda _: condition(), f"timed out waiting for {what}")

    def type(self, text: str) -> None:
        box = self.driver.find_element(By.ID, "text")
        box.send_keys(text)
        box.send_keys(Keys.ENTER)

    def bubbles(self, css: str) -> list[WebElement]:
        return list(self.driver.find_elements(By.CSS_SELECTOR, f"#log {css}"))

    def texts(self, css: str) -> list[str]:
        return [str(el.text) for el in self.bubbles(css)]

    def reply_containing(self, text: str) -> WebElement:
        """The final (not preview) reply bubble whose text contains `text`, once it is there."""

        def found() -> WebElement | None:
            for el in self.bubbles(".bot:not(.preview)"):
                if text in el.text:
                    return el
            return None

        return self.wait_for(found, f"a reply containing {text!r}")  # type: ignore[no-any-return]

    def layout(self) -> dict[str, Any]:
        return dict(self.driver.execute_script(LAYOUT_JS))

    def screenshot(self, name: str) -> Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{name}.png"
        self.driver.save_screenshot(str(path))
        return path

    def quit(self) -> None:
        self.driver.quit()


@pytest_asyncio.fixture
async def browser_at(tmp_path: Path) -> AsyncIterator[Callable[[tuple[int, int]], Browser]]:
    """Start a browser of a given viewport size (closed after the test)."""
    started: list[Browser] = []

    def start(size: tuple[int, int]) -> Browser:
        browser = Browser(tmp_path / f"chromium-{len(started)}", size)
        started.append(browser)
        return browser

    yield start
    for browser in started:
        await asyncio.to_thread(browser.quit)
    for n in range(len(started)):
        shutil.rmtree(tmp_path / f"chromium-{n}", ignore_errors=True)


def assert_fits(layout: dict[str, Any]) -> None:
    width, height = layout["innerWidth"], layout["innerHeight"]
    assert layout["scrollWidth"] <= width, layout  # no horizontal page scroll
    assert layout["scrollHeight"] <= height, layout  # no vertical page scroll
    assert layout["widestBubble"] <= width, layout
    box = layout["input"]
    assert box["top"] >= 0 and box["left"] >= 0, layout
    assert box["bottom"] <= height and box["right"] <= width, layout


@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["desktop", "phone"])
async def test_page_fits_the_window_and_renders_streamed_markdown(
    tmp_path: Path,
    fake_anthropic: FakeAnthropic,
    browser_at: Callable[[tuple[int, int]], Browser],
    size: tuple[int, int],
) -> None:
    fake_anthropic.default_handler = markdown_reply
    fake_anthropic.chunk_delay = 0.05  # long enough for streamed previews to show
    label = f"{size[0]}x{size[1]}"
    async with KrillProcess(tmp_path, {}, model_env(fake_anthropic)) as krill:
        browser = await asyncio.to_thread(browser_at, size)
        await asyncio.to_thread(browser.open, f"{krill.url}/?name=alice")
        await asyncio.to_thread(browser.screenshot, f"{label}-empty")
        assert_fits(await asyncio.to_thread(browser.layout))
        await asyncio.to_thread(browser.driver.execute_script, WATCH_PREVIEWS_JS)

        await asyncio.to_thread(browser.type, f"please remember {LONG_WORD}")
        reply = await asyncio.to_thread(browser.reply_containing, "You said")
        await asyncio.to_thread(browser.screenshot, f"{label}-reply")
        layout = await asyncio.to_thread(browser.layout)
        html = await asyncio.to_thread(reply.get_attribute, "innerHTML")
        saw_preview = await asyncio.to_thread(
            browser.driver.execute_script, "return window.sawPreview"
        )
        icon = await asyncio.to_thread(
            browser.driver.execute_script,
            "return document.querySelector('link[rel=icon]').getAttribute('href')",
        )
        icon_status, icon_body = await krill.get(icon)

    assert_fits(layout)
    assert saw_preview, "the reply was not streamed"
    assert "<strong>Noted.</strong>" in html
    assert re.search(r"<ul>\s*<li>first item</li>", html)
    assert "<pre><code>print('hello')" in html
    assert '<a href="https://example.com/docs" target="_blank"' in html
    assert 'href="javascript' not in html and "[this](javascript:alert(1))" in html
    assert "<img" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    assert LONG_WORD in html
    assert icon_status == 200 and icon_body.startswith("<svg")


async def test_reload_shows_the_conversation_of_that_person_only(
    tmp_path: Path,
    fake_anthropic: FakeAnthropic,
    browser_at: Callable[[tuple[int, int]], Browser],
) -> None:
    fake_anthropic.default_handler = markdown_reply
    async with KrillProcess(tmp_path, {}, model_env(fake_anthropic)) as krill:
        await krill.chat("a note from bob", user="bob")
        browser = await asyncio.to_thread(browser_at, DESKTOP)
        await asyncio.to_thread(browser.open, f"{krill.url}/?name=alice")
        assert await asyncio.to_thread(browser.bubbles, ".msg") == []
        await asyncio.to_thread(browser.type, "the blue door")
        await asyncio.to_thread(browser.reply_containing, "the blue door")

        await asyncio.to_thread(browser.reload)
        reply = await asyncio.to_thread(browser.reply_containing, "the blue door")
        await asyncio.to_thread(browser.screenshot, "1280x720-after-reload")
        mine = await asyncio.to_thread(browser.texts, ".me")
        html = await asyncio.to_thread(reply.get_attribute, "innerHTML")
        text = await asyncio.to_thread(lambda: browser.driver.find_element(By.ID, "log").text)
        assert_fits(await asyncio.to_thread(browser.layout))

    assert mine == ["the blue door"]
    assert "<strong>Noted.</strong>" in html
    assert "bob" not in text


async def test_a_message_typed_while_disconnected_is_pending_then_sent_once(
    tmp_path: Path,
    fake_anthropic: FakeAnthropic,
    browser_at: Callable[[tuple[int, int]], Browser],
) -> None:
    fake_anthropic.default_handler = plain_echo
    config = {"server": {"port": free_port()}}
    krill = await KrillProcess(tmp_path, config, model_env(fake_anthropic)).start()
    try:
        browser = await asyncio.to_thread(browser_at, PHONE)
        await asyncio.to_thread(browser.open, f"{krill.url}/?name=carol")
    finally:
        await krill.stop()
    await asyncio.to_thread(
        browser.wait_for, lambda: "disconnected" in browser.state(), "the page to notice"
    )
    await asyncio.to_thread(browser.type, "sent while offline")
    pending = await asyncio.to_thread(browser.texts, ".me.pending")
    note = await asyncio.to_thread(browser.driver.execute_script, PENDING_NOTE_JS)
    assert pending == ["sent while offline"]
    assert note == '"waiting for the connection"'
    await asyncio.to_thread(browser.screenshot, "390x844-pending")

    async with KrillProcess(tmp_path, config, model_env(fake_anthropic)):
        await asyncio.to_thread(browser.reply_containing, "echo: sent while offline")
        still_pending = await asyncio.to_thread(browser.bubbles, ".me.pending")
        await asyncio.to_thread(browser.screenshot, "390x844-delivered")

    assert still_pending == []
    asked = [r for r in fake_anthropic.message_requests if "sent while offline" in r.last_user_text]
    assert len(asked) == 1


# Records when the typing indicator came and went, and when the first reply bubble appeared.
WATCH_THINKING_JS = """
window.thinking = {shown: null, hidden: null, reply: null};
new MutationObserver(() => {
  const now = performance.now(), t = window.thinking;
  const shown = document.querySelector('[data-testid="typing-indicator"]') !== null;
  if (shown && t.shown === null) t.shown = now;
  if (!shown && t.shown !== null && t.hidden === null) t.hidden = now;
  if (t.reply === null && document.querySelector('.bot:not(.thinking)')) t.reply = now;
}).observe(document.getElementById('log'), {subtree: true, childList: true});
"""


@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["desktop", "phone"])
async def test_a_typing_indicator_shows_while_the_model_thinks(
    tmp_path: Path,
    fake_anthropic: FakeAnthropic,
    browser_at: Callable[[tuple[int, int]], Browser],
    size: tuple[int, int],
) -> None:
    fake_anthropic.default_handler = plain_echo
    fake_anthropic.delay = 3.0  # the model thinks before its first word
    label = f"{size[0]}x{size[1]}"
    async with KrillProcess(tmp_path, {}, model_env(fake_anthropic)) as krill:
        browser = await asyncio.to_thread(browser_at, size)
        await asyncio.to_thread(browser.open, f"{krill.url}/?name=dora")
        await asyncio.to_thread(browser.driver.execute_script, WATCH_THINKING_JS)
        await asyncio.to_thread(browser.type, "what do you think?")
        indicator = await asyncio.to_thread(
            browser.wait_for,
            lambda: browser.bubbles('[data-testid="typing-indicator"]'),
            "the typing indicator",
        )
        shown = await asyncio.to_thread(indicator[0].is_displayed)
        replies_meanwhile = await asyncio.to_thread(browser.bubbles, ".bot:not(.thinking)")
        label_text = await asyncio.to_thread(indicator[0].get_attribute, "aria-label")
        await asyncio.to_thread(browser.screenshot, f"{label}-thinking")
        assert_fits(await asyncio.to_thread(browser.layout))
        await asyncio.to_thread(browser.reply_containing, "echo: what do you think?")
        await asyncio.to_thread(
            browser.wait_for,
            lambda: not browser.bubbles('[data-testid="typing-indicator"]'),
            "the indicator to go",
        )
        await asyncio.to_thread(browser.screenshot, f"{label}-answered")
        times = await asyncio.to_thread(browser.driver.execute_script, "return window.thinking")

    assert shown and replies_meanwhile == [] and label_text == "Krill is thinking"
    # Shown before the reply's first words, gone when they came.
    assert times["shown"] < times["reply"], times
    assert times["hidden"] is not None and times["hidden"] <= times["reply"] + 50, times
