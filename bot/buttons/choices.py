"""Choices as buttons, decided without I/O: what a button's data says (the choice's id and an
option number, well within Telegram's 64 bytes of callback data), a choice's options laid
out as button rows, whether a press counts, and the line the presser is shown.

A press counts once: from the person the choice was for or an admin, before it expired,
on the choice's own chat, while nobody else answered it first.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Any, Protocol

from bot.channel_contract import PressAnswer, PressResult
from bot.store.choices import TIMED_OUT, Choice, ChoiceKind, ChoiceOption, ChoiceStatus
from bot.types import Button, ButtonPress, ButtonRows

# Button data is "<prefix>:<choice id>:<option>"; the prefix names this format, so data
# from another bot or an older format is told apart instead of misread.
DATA_PREFIX = "k1"
ID_BYTES = 12  # 16 characters of URL-safe base64
MAX_OPTIONS = 25  # Slack's limit on the elements of one actions block
# Telegram shows at most this many characters of a press's answer.
ANSWER_CHARS = 200

EXPIRED_TEXT = "Sorry, this button has expired."
NOT_YOURS_TEXT = "Only {owner} or an admin can answer this."
ALREADY_TEXT = "Already answered."
TIMED_OUT_LINE = "⌛ No answer in time; the buttons have expired."


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a press came to: the line its message shows under its text, and the text to
    show instead where the old one is no longer true (the model list's marker)."""

    line: str
    text: str | None = None


class ChoiceAction(Protocol):
    """What pressing one kind of choice does (each kind has one, given to the gateway)."""

    async def act(self, choice: Choice) -> Outcome:
        """Do what the option pressed on `choice` says (`option` is TIMED_OUT when nobody
        answered in time); returns what its message shows after. Runs in the session's
        lane. It may run twice for one press (a crash between acting and recording that it
        did): the second run must change nothing more."""
        ...


def presser(choice: Choice) -> str:
    """Who pressed, as the outcome line names them."""
    return choice.pressed_name or choice.pressed_by.partition(":")[2] or "someone"


@dataclass(frozen=True, slots=True)
class ChoiceSpec:
    """A choice to offer: the message, its options, who may answer, and what its kind's
    action needs besides the option pressed."""

    kind: ChoiceKind
    text: str
    options: tuple[ChoiceOption, ...]
    owner: str  # "<channel>:<user_id>" of the person the buttons are for
    owner_name: str = ""
    payload: dict[str, Any] = field(default_factory=dict)
    columns: int = 1  # buttons per row
    expire_seconds: float | None = None  # None: buttons.expire_after
    # What a channel without buttons shows instead ("": the text and the options listed).
    fallback: str = ""


def new_choice_id() -> str:
    return secrets.token_urlsafe(ID_BYTES)


def button_data(choice_id: str, option: int) -> str:
    return f"{DATA_PREFIX}:{choice_id}:{option}"


def parse_button_data(data: str) -> tuple[str, int] | None:
    """(choice id, option) from a button's data; None when it is not Krill's."""
    prefix, _, rest = data.partition(":")
    choice_id, _, option = rest.partition(":")
    if prefix != DATA_PREFIX or not choice_id or not option.isdigit():
        return None
    return choice_id, int(option)


def button_rows(
    choice_id: str, options: tuple[ChoiceOption, ...], columns: int, label_chars: int
) -> ButtonRows:
    """The options as buttons, `columns` to a row, labels cut to `label_chars`."""
    buttons = [
        Button(_clip(option.label, label_chars), button_data(choice_id, index), option.style)
        for index, option in enumerate(options)
    ]
    width = max(1, columns)
    return tuple(tuple(buttons[i : i + width]) for i in range(0, len(buttons), width))


def as_text(text: str, options: tuple[ChoiceOption, ...]) -> str:
    """A choice for a channel without buttons: the options listed under the text, so the
    person can type their answer."""
    return text + "\n" + "\n".join(f"• {option.label}" for option in options)


def press_verdict(
    choice: Choice | None, press: ButtonPress, option: int, *, now: float, admin: bool
) -> PressResult:
    """Whether `press` of `option` counts against `choice` (None: no such choice)."""
    if choice is None or (choice.address.channel, choice.address.chat_id) != (
        press.channel,
        press.chat_id,
    ):
        return PressResult.EXPIRED
    if choice.status is not ChoiceStatus.PENDING:
        if choice.press_id and choice.press_id == press.press_id:
            return PressResult.DONE  # the same press, delivered again
        return PressResult.EXPIRED if choice.option == TIMED_OUT else PressResult.ALREADY
    if now >= choice.expires_at or not 0 <= option < len(choice.options):
        return PressResult.EXPIRED
    if press.principal != choice.owner and not admin:
        return PressResult.NOT_YOURS
    return PressResult.DONE


def press_answer(result: PressResult, choice: Choice | None, option: int) -> PressAnswer:
    """The verdict with the line its presser is shown."""
    if result is PressResult.DONE and choice is not None and 0 <= option < len(choice.options):
        text = f"✓ {choice.options[option].label}"
    elif result is PressResult.NOT_YOURS and choice is not None:
        owner = choice.owner_name or "the person it was for"
        text = NOT_YOURS_TEXT.format(owner=owner)
    elif result is PressResult.ALREADY and choice is not None and choice.outcome:
        text = f"{ALREADY_TEXT} {choice.outcome}"
    elif result is PressResult.ALREADY:
        text = ALREADY_TEXT
    else:
        text = EXPIRED_TEXT
    return PressAnswer(result, _clip(text, ANSWER_CHARS))


def answered_text(choice: Choice, outcome: Outcome) -> str:
    """What the message says once answered: its text (or the new one), then the outcome."""
    text = choice.text if outcome.text is None else outcome.text
    return f"{text}\n\n{outcome.line}" if outcome.line else text


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(1, limit - 1)] + "…"
