"""The pure rules of buttons: what a button's data says, how options become rows, and which
press counts (the person it was for or an admin, before it expired, once)."""

from __future__ import annotations

import pytest

from bot.buttons.choices import (
    EXPIRED_TEXT,
    button_data,
    button_rows,
    parse_button_data,
    press_answer,
    press_verdict,
)
from bot.channel_contract import PressResult
from bot.store.choices import TIMED_OUT, Choice, ChoiceKind, ChoiceOption, ChoiceStatus
from bot.types import Address, ButtonPress, ButtonStyle

OPTIONS = (
    ChoiceOption("✅ Approve", "approve", ButtonStyle.PRIMARY),
    ChoiceOption("❌ Deny", "deny"),
)


def choice(**fields: object) -> Choice:
    base: dict[str, object] = {
        "id": "AbCdEfGhIjKlMnOp",
        "kind": ChoiceKind.APPROVAL,
        "session_key": "agent:main:telegram:group:-100",
        "address": Address("telegram", "-100"),
        "owner": "telegram:7",
        "owner_name": "Alice",
        "text": "May I?",
        "options": OPTIONS,
        "payload": {},
        "reply_id": "choice-AbCdEfGhIjKlMnOp",
        "status": ChoiceStatus.PENDING,
        "created_at": 1000.0,
        "expires_at": 2000.0,
    }
    return Choice(**{**base, **fields})  # type: ignore[arg-type]


def press(user: str = "7", *, chat: str = "-100", press_id: str = "q1") -> ButtonPress:
    return ButtonPress("telegram", press_id, button_data("AbCdEfGhIjKlMnOp", 1), chat, user)


def test_button_data_names_the_choice_and_option_in_telegram_s_64_bytes() -> None:
    data = button_data("AbCdEfGhIjKlMnOp", 24)
    assert len(data.encode()) <= 64
    assert parse_button_data(data) == ("AbCdEfGhIjKlMnOp", 24)
    for foreign in ("", "k2:AbC:1", "k1:AbC:x", "k1::1", "approve", "k1:AbC:-1"):
        assert parse_button_data(foreign) is None


def test_options_become_rows_with_labels_cut_to_the_channel_s_width() -> None:
    options = tuple(ChoiceOption(f"option {i} " + "x" * 90, str(i)) for i in range(5))
    rows = button_rows("id", options, 2, 20)
    assert [len(row) for row in rows] == [2, 2, 1]
    assert all(len(b.label) == 20 and b.label.endswith("…") for row in rows for b in row)
    assert rows[2][0].data == button_data("id", 4)


@pytest.mark.parametrize(
    ("fields", "given", "admin", "result"),
    [
        ({}, press(), False, PressResult.DONE),  # the person it was for
        ({}, press("8"), False, PressResult.NOT_YOURS),  # another member
        ({}, press("8"), True, PressResult.DONE),  # an admin
        ({}, press(chat="-200"), False, PressResult.EXPIRED),  # a button from another chat
        ({"expires_at": 1500.0}, press(), False, PressResult.EXPIRED),  # too late
        (
            {"status": ChoiceStatus.DONE, "option": 0, "press_id": "q0"},
            press(),
            False,
            PressResult.ALREADY,
        ),
        (
            {"status": ChoiceStatus.PRESSED, "option": 1, "press_id": "q1"},
            press(),
            False,
            PressResult.DONE,
        ),
        ({"status": ChoiceStatus.DONE, "option": TIMED_OUT}, press(), False, PressResult.EXPIRED),
    ],
)
def test_which_press_counts(
    fields: dict[str, object], given: ButtonPress, admin: bool, result: PressResult
) -> None:
    assert press_verdict(choice(**fields), given, 1, now=1600.0, admin=admin) is result


def test_a_missing_row_or_an_option_it_never_had_is_an_expired_button() -> None:
    assert press_verdict(None, press(), 1, now=0.0, admin=True) is PressResult.EXPIRED
    assert press_verdict(choice(), press(), 5, now=1100.0, admin=False) is PressResult.EXPIRED
    assert press_answer(PressResult.EXPIRED, None, 1).text == EXPIRED_TEXT


def test_what_the_presser_is_told() -> None:
    pending = choice()
    assert press_answer(PressResult.DONE, pending, 1).text == "✓ ❌ Deny"
    refused = press_answer(PressResult.NOT_YOURS, pending, 1).text
    assert refused == "Only Alice or an admin can answer this."
    answered = choice(status=ChoiceStatus.DONE, option=0, outcome="✅ Approved by Alice.")
    assert press_answer(PressResult.ALREADY, answered, 1).text.endswith("Approved by Alice.")
    long = choice(status=ChoiceStatus.DONE, option=0, outcome="x" * 500)
    assert len(press_answer(PressResult.ALREADY, long, 1).text) == 200  # Telegram's limit
