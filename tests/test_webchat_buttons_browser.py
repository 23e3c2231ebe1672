"""Buttons in the web chat, in Debian's headless Chromium against the real `krill run`: /model's
list shows a button per model, a click switches the session's model and the message is
redrawn with the outcome and without its buttons, at a desktop and a phone size
(screenshots in test-artifacts/webchat/)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from selenium.webdriver.common.by import By

from tests.fakes.anthropic import FakeAnthropic
from tests.krill_process import KrillProcess
from tests.test_e2e_local import model_env, plain_echo
from tests.test_webchat_browser import DESKTOP, PHONE, Browser, assert_fits, browser_at

__all__ = ["browser_at"]  # the fixture, used by name

MODELS = ["claude-sonnet-4-6", "claude-haiku-4-5"]
BUTTONS = "[data-testid=choice-button]"


def button_labels(browser: Browser) -> list[str]:
    return [str(b.text) for b in browser.bubbles(BUTTONS)]


def click(browser: Browser, label: str) -> None:
    for button in browser.bubbles(BUTTONS):
        if button.text == label:
            button.click()
            return
    raise AssertionError(f"no button {label!r}")


@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["desktop", "phone"])
async def test_model_buttons_switch_the_model_and_go_away(
    tmp_path,
    fake_anthropic: FakeAnthropic,
    browser_at: Callable[[tuple[int, int]], Browser],
    size: tuple[int, int],
) -> None:
    fake_anthropic.default_handler = plain_echo
    label = f"{size[0]}x{size[1]}"
    config = {"agent": {"models": MODELS}}
    async with KrillProcess(tmp_path, config, model_env(fake_anthropic)) as krill:
        browser = await asyncio.to_thread(browser_at, size)
        await asyncio.to_thread(browser.open, f"{krill.url}/?name=alice")
        await asyncio.to_thread(browser.type, "/model")
        await asyncio.to_thread(
            browser.wait_for, lambda: len(button_labels(browser)) == 2, "the model buttons"
        )
        assert await asyncio.to_thread(button_labels, browser) == MODELS
        await asyncio.to_thread(browser.screenshot, f"{label}-buttons")
        assert_fits(await asyncio.to_thread(browser.layout))

        await asyncio.to_thread(click, browser, "claude-haiku-4-5")
        reply = await asyncio.to_thread(
            browser.reply_containing, "Model switched to claude-haiku-4-5"
        )
        await asyncio.to_thread(browser.wait_for, lambda: not button_labels(browser), "no buttons")
        await asyncio.to_thread(browser.screenshot, f"{label}-pressed")
        bubbles = await asyncio.to_thread(browser.texts, ".bot")
        log_text = await asyncio.to_thread(lambda: browser.driver.find_element(By.ID, "log").text)
        assert "Models for this session" in reply.text

        await asyncio.to_thread(browser.type, "which model?")
        await asyncio.to_thread(browser.reply_containing, "echo: which model?")
    assert len(bubbles) == 1  # the list's own message was redrawn, not a new one
    assert "expired" not in log_text and "Already" not in log_text
    assert fake_anthropic.message_requests[-1].body["model"] == "claude-haiku-4-5"
