"""Buttons end to end: the real `krill run` over long polling with the fake Bot API and the
fake model. /model's list pressed, /reset confirmed in a group, approvals (run on approve,
refused on deny and on timeout, refused to another member), ask_choice answered by a press,
a double press acting once, and a button whose row is gone.

One Krill process serves the module; each test uses its own chats.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests.fakes.anthropic import FakeAnthropic, Reply, text_of
from tests.fakes.telegram import FakeTelegram
from tests.krill_process import KrillProcess

pytestmark = pytest.mark.asyncio(loop_scope="module")

ADMIN = 101  # in admin.users
MEMBER = 102  # an ordinary member of the groups
OTHER = 103  # another member
TIMEOUT = 15.0
MODELS = ["claude-sonnet-4-6", "claude-haiku-4-5"]


def script(body: dict[str, Any]) -> Reply | str:
    """The fake model: tools when asked for them, NO_REPLY after an approval is asked for or
    a question is put, and an echo of what it was told otherwise."""
    last = body["messages"][-1]
    said = text_of(last["content"])
    results = [b for b in last["content"] if isinstance(b, dict) and b["type"] == "tool_result"]
    if results:
        return "NO_REPLY"
    if "[Approval]" in said:
        return "MODEL TOLD: " + said[said.index("[Approval]") :].split("\n")[0]
    if "send me the notes" in said:
        return Reply.tool_use("send_file", {"path": "notes.txt", "caption": "the notes"})
    if "tea or coffee" in said:
        return Reply.tool_use(
            "ask_choice", {"question": "Tea or coffee?", "options": ["Tea", "Coffee"]}
        )
    return "echo: " + last_line(said)


def last_line(said: str) -> str:
    """The last line of what the person said (inside its untrusted markers)."""
    return [line for line in said.strip().split("\n") if not line.startswith("<<<")][-1]


@dataclass
class Env:
    tg: FakeTelegram
    model: FakeAnthropic
    krill: KrillProcess
    directory: Path

    async def until(self, check: Callable[[], Any], what: str) -> Any:
        deadline = asyncio.get_running_loop().time() + TIMEOUT
        while not (found := check()):
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(
                    f"timed out waiting for {what}; calls:\n{self.tg.dump_calls(12)}\n"
                    f"log:\n{self.krill.log()[-3000:]}"
                )
            await asyncio.sleep(0.05)
        return found

    async def buttons(self, chat: int) -> list[str]:
        return list(await self.until(lambda: self.tg.buttons(chat), f"buttons in {chat}"))

    async def press(self, chat: int, user: int, label: str, **kw: Any) -> tuple[dict, str]:
        """Press `label` as `user`; (the callback query, the answer Telegram showed)."""
        update = self.tg.push_update(self.tg.press(chat, user, label, **kw))
        return update["callback_query"], await self.answer(update)

    async def answer(self, update: dict[str, Any]) -> str:
        """What Telegram showed for the press `update` (pushed already)."""
        query = update["callback_query"]["id"]
        answer = await self.until(lambda: self.tg.callback_answers.get(query), "an answer")
        return str(answer.get("text", ""))

    async def message(self, chat: int, needle: str) -> dict[str, Any]:
        def found() -> dict[str, Any] | None:
            return next(
                (m for m in self.tg.bot_messages(chat) if needle in m.get("text", "")), None
            )

        return dict(await self.until(found, f"a message saying {needle!r} in {chat}"))

    def requests_saying(self, needle: str) -> list[str]:
        return [
            text_of(r.messages[-1]["content"])
            for r in self.model.message_requests
            if needle in text_of(r.messages[-1]["content"])
        ]


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def env(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Env]:
    directory = tmp_path_factory.mktemp("buttons-e2e")
    async with FakeTelegram() as tg, FakeAnthropic() as model:
        model.default_handler = script
        config = {
            "anthropic": {"max_retries": 0},
            "agent": {"models": MODELS},
            "admin": {"users": [f"telegram:{ADMIN}"]},
            "tools": {"policy": {"confirm_timeout": "3s"}},
            "telegram": {
                "enabled": True,
                "token": tg.token,
                "api_base_url": tg.url,
                "dm_policy": "open",
                "stream_interval": 0,
            },
        }
        async with KrillProcess(directory, config, model.env()) as krill:
            (directory / "workspace" / "notes.txt").write_text("the meeting is at noon\n")
            yield Env(tg, model, krill, directory)


async def test_model_list_pressed_switches_once_and_the_message_says_so(env: Env) -> None:
    tg = env.tg
    tg.push_update(tg.command(ADMIN, ADMIN, "/model"))
    assert await env.buttons(ADMIN) == MODELS
    listing = tg.bot_messages(ADMIN)[-1]
    # Two presses before the buttons go away (a double tap): the first counts, once.
    first = tg.press(ADMIN, ADMIN, "claude-haiku-4-5")
    second = tg.press(ADMIN, ADMIN, "claude-sonnet-4-6")
    tg.push_update(first)
    tg.push_update(second)
    assert await env.answer(first) == "✓ claude-haiku-4-5"
    assert (await env.answer(second)).startswith("Already answered.")
    edited = await env.message(ADMIN, "Model switched to claude-haiku-4-5")
    assert edited["message_id"] == listing["message_id"] and "reply_markup" not in edited
    tg.push_update(tg.private_message(ADMIN, "which model?"))
    await env.message(ADMIN, "echo: which model?")
    assert env.model.message_requests[-1].body["model"] == "claude-haiku-4-5"
    switched = [c for c in tg.calls_to("editMessageText") if "switched" in c.get("text", "")]
    assert len(switched) == 1


async def test_a_button_whose_row_is_gone_has_expired(env: Env) -> None:
    tg = env.tg
    chat = ADMIN + 1000
    tg.push_update(tg.private_message(chat, "hello"))
    await env.message(chat, "echo: hello")
    update = tg.push_update(tg.callback_query(chat, "k1:NoSuchChoice0000:0", chat_id=chat))
    query = update["callback_query"]
    answer = await env.until(lambda: tg.callback_answers.get(query["id"]), "an answer")
    assert answer["text"] == "Sorry, this button has expired."


async def test_reset_in_a_group_asks_first_and_a_press_starts_afresh(env: Env) -> None:
    tg, group = env.tg, -100201
    for n in range(4):
        tg.push_update(tg.group_message(group, ADMIN, f"turn {n}", mention=True))
        await env.message(group, f"turn {n}")
    tg.push_update(tg.command(group, ADMIN, "/reset", group=True))
    assert await env.buttons(group) == ["🧹 Start fresh", "Keep it"]
    question = tg.bot_messages(group)[-1]
    assert "This conversation has 4 turns" in question["text"]
    _, answer = await env.press(group, ADMIN, "🧹 Start fresh")
    assert answer == "✓ 🧹 Start fresh"
    await env.message(group, "New session started by")
    tg.push_update(tg.group_message(group, ADMIN, "fresh start?", mention=True))
    await env.message(group, "echo: fresh start?")
    # The new session's request holds only the new message: nothing of the four turns.
    assert "turn 3" not in json.dumps(env.model.message_requests[-1].body["messages"])


async def test_an_approval_refuses_another_member_and_runs_on_approve(env: Env) -> None:
    tg, group = env.tg, -100202
    tg.push_update(
        tg.group_message(group, MEMBER, "send me the notes", mention=True, first_name="Mia")
    )
    assert await env.buttons(group) == ["✅ Approve", "❌ Deny"]
    assert "send_file" in tg.bot_messages(group)[-1]["text"]
    assert tg.sent_media == []  # it waits
    # ...without holding up the chat: typing instead of pressing is answered as usual.
    tg.push_update(tg.group_message(group, MEMBER, "still there?", mention=True, first_name="Mia"))
    await env.message(group, "echo: still there?")
    _, refused = await env.press(group, OTHER, "✅ Approve", first_name="Otto")
    assert refused == "Only Mia or an admin can answer this."
    _, metrics = await env.krill.get("/metrics")
    assert 'krill_button_presses_total{channel="telegram",result="not_yours"}' in metrics
    _, answer = await env.press(group, MEMBER, "✅ Approve", first_name="Mia")
    assert answer == "✓ ✅ Approve"
    await env.message(group, "MODEL TOLD: [Approval] Mia approved your call to send_file")
    (sent,) = [m for m, _ in tg.sent_media if m["chat"]["id"] == group]
    assert sent.get("caption") == "the notes"
    await env.message(group, "✅ Approved by Mia.")
    told = env.requests_saying("approved your call to send_file")
    assert len(told) == 1 and "is on its way" in told[0]


async def test_an_approval_is_refused_on_deny_and_on_timeout(env: Env) -> None:
    tg, group = env.tg, -100203
    tg.push_update(
        tg.group_message(group, MEMBER, "send me the notes", mention=True, first_name="Mia")
    )
    await env.buttons(group)
    await env.press(group, MEMBER, "❌ Deny", first_name="Mia")
    await env.message(group, "MODEL TOLD: [Approval] Mia denied your call to send_file")
    await env.message(group, "❌ Denied by Mia: not run.")
    tg.push_update(
        tg.group_message(group, MEMBER, "send me the notes", mention=True, first_name="Mia")
    )
    await env.until(lambda: len(env.requests_saying("Nobody approved")) == 1, "the timeout")
    await env.message(group, "MODEL TOLD: [Approval] Nobody approved your call to send_file")
    await env.message(group, "⌛ Not approved within 3s: not run.")
    assert not [m for m, _ in tg.sent_media if m["chat"]["id"] == group]
    assert tg.buttons(group) == []  # every approval lost its buttons


async def test_ask_choice_comes_back_as_the_person_s_next_message(env: Env) -> None:
    tg, chat = env.tg, MEMBER
    tg.push_update(tg.private_message(chat, "tea or coffee?", first_name="Mia"))
    assert await env.buttons(chat) == ["Tea", "Coffee"]
    assert "Tea or coffee?" in tg.bot_messages(chat)[-1]["text"]
    await env.press(chat, chat, "Coffee", first_name="Mia")
    await env.message(chat, "echo: Coffee")
    await env.message(chat, "✅ Mia: Coffee")
    answered = env.requests_saying("answered your question by pressing a button")
    assert len(answered) == 1 and last_line(answered[0]) == "Coffee", answered
