"""/model: listing agent.models with the session's marked, switching (admins, or the owner
of a DM), refusing unknown ids, and the next request using the chosen model, also after a
restart and a /reset."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.commands import Command, authorized
from bot.types import ChatType
from tests.app_harness import Harness, message
from tests.fakes.anthropic import FakeAnthropic

MODELS = """
[agent]
model = "claude-sonnet-4-6"
models = ["claude-sonnet-4-6", "claude-haiku-4-5"]
[admin]
local_is_admin = false
"""


def test_switching_is_for_admins_and_dm_owners_listing_for_everyone() -> None:
    group = message("/model", chat_type=ChatType.GROUP, chat_id="g1")
    dm = message("/model")
    switch = Command("model", "claude-haiku-4-5")
    assert authorized(Command("model", ""), group, admin=False, shared_dm=False)
    assert not authorized(switch, group, admin=False, shared_dm=False)
    assert authorized(switch, group, admin=True, shared_dm=False)
    assert authorized(switch, dm, admin=False, shared_dm=False)
    assert not authorized(switch, dm, admin=False, shared_dm=True)


async def test_model_switch_is_used_by_the_next_request_and_survives_a_restart(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    async with Harness(tmp_path, fake_anthropic.url, MODELS) as h:
        await h.send("hello")
        assert fake_anthropic.message_requests[-1].body["model"] == "claude-sonnet-4-6"
        await h.send("/model")
        listing = h.channel.finals[-1]
        await h.send("/model gpt-9")
        unknown = h.channel.finals[-1]
        await h.send("/model claude-haiku-4-5")
        switched = h.channel.finals[-1]
        await h.send("which model now?")
        await h.send("/model claude-haiku-4-5", chat_type=ChatType.GROUP, chat_id="g1")
        group_refusal = h.channel.finals[-1]
    assert "▶ claude-sonnet-4-6 (current)" in listing and "• claude-haiku-4-5" in listing
    assert "Unknown model 'gpt-9'" in unknown and "claude-haiku-4-5" in unknown
    assert "switched to claude-haiku-4-5" in switched and "cache break" in switched
    assert fake_anthropic.message_requests[-1].body["model"] == "claude-haiku-4-5"
    assert "only an admin can use /model" in group_refusal

    async with Harness(tmp_path, fake_anthropic.url, MODELS) as h:
        await h.send("/status")
        status = h.channel.finals[-1]
        await h.send("still there?")
        assert fake_anthropic.message_requests[-1].body["model"] == "claude-haiku-4-5"
        await h.send("/reset")
        reset = h.channel.finals[-1]
        await h.send("after the reset")
    assert "Model: claude-haiku-4-5" in status
    assert "Model: claude-haiku-4-5" in reset  # the conversation keeps its choice
    assert fake_anthropic.message_requests[-1].body["model"] == "claude-haiku-4-5"


async def test_a_model_taken_out_of_agent_models_falls_back_with_one_note(
    tmp_path: Path, fake_anthropic: FakeAnthropic, caplog: pytest.LogCaptureFixture
) -> None:
    async with Harness(tmp_path, fake_anthropic.url, MODELS) as h:
        await h.send("/model claude-haiku-4-5")
        await h.send("hello")
        assert fake_anthropic.message_requests[-1].body["model"] == "claude-haiku-4-5"

    # The operator takes haiku out of agent.models and restarts.
    narrowed = MODELS.replace(', "claude-haiku-4-5"]', "]")
    async with Harness(tmp_path, fake_anthropic.url, narrowed) as h:
        first = await answer(h, "still there?")
        requested = fake_anthropic.message_requests[-1].body["model"]
        second, status, listing = [await answer(h, t) for t in ("and now?", "/status", "/model")]
    assert requested == "claude-sonnet-4-6"
    assert "claude-haiku-4-5 is no longer offered" in first
    assert "now uses claude-sonnet-4-6" in first
    assert first.index("no longer offered") < first.index("echo: ")  # ahead of the reply
    assert "echo: " in second and "no longer offered" not in second  # once
    assert fake_anthropic.message_requests[-1].body["model"] == "claude-sonnet-4-6"
    assert "Model: claude-sonnet-4-6" in status
    assert "▶ claude-sonnet-4-6 (current)" in listing
    logged = [r.getMessage() for r in caplog.records if "no longer offers" in r.getMessage()]
    assert len(logged) == 1 and "claude-haiku-4-5" in logged[0]


async def answer(h: Harness, text: str) -> str:
    """What the person sees in reply to `text`."""
    await h.send(text)
    return h.channel.finals[-1]
