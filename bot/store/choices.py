"""Choices offered with buttons: one row per message with buttons, holding everything a press
needs (what each button means, who may press it, what the message says), so a button
carries only the row's id. A press moves the row from pending to pressed once, whichever
process receives it; its action then runs and moves it to done."""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from bot.store.db import Db, Row
from bot.types import Address, ButtonStyle


class ChoiceKind(StrEnum):
    """What a press of the choice does (`bot/buttons/`, and the action of each kind)."""

    MODEL = "model"  # /model: switch the session's model
    RESET = "reset"  # /reset, /new: start a fresh session, or keep this one
    REMINDER = "reminder"  # a reminder that fired: snooze it, or mark it done
    JOB = "job"  # a scheduled job's run: pause the job
    APPROVAL = "approval"  # a tool call marked confirm: run it, or refuse it
    QUESTION = "question"  # ask_choice: the answer becomes the person's next message


class ChoiceStatus(StrEnum):
    PENDING = "pending"  # offered: waits for a press, or its expiry
    PRESSED = "pressed"  # a press (or the expiry) is recorded; its action has not finished
    DONE = "done"  # acted on; `outcome` says how


# The `option` of a choice nobody answered before it expired.
TIMED_OUT = -1


@dataclass(frozen=True, slots=True)
class ChoiceOption:
    label: str
    value: str  # what the action reads: a model id, a snooze in seconds, "approve"
    style: ButtonStyle = ButtonStyle.PLAIN

    def to_dict(self) -> dict[str, str]:
        return {"label": self.label, "value": self.value, "style": str(self.style)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ChoiceOption:
        return cls(str(data["label"]), str(data["value"]), ButtonStyle(data.get("style", "plain")))


@dataclass(slots=True)
class Choice:
    id: str
    kind: ChoiceKind
    session_key: str
    address: Address  # the conversation (chat, thread or topic) of the message
    owner: str  # who the buttons are for, "<channel>:<user_id>"; admins may press them too
    owner_name: str
    text: str  # what the message with the buttons says
    options: tuple[ChoiceOption, ...]
    payload: dict[str, Any]  # what the kind's action needs besides the option
    reply_id: str  # the outbox reply that carries the message
    status: ChoiceStatus
    created_at: float
    expires_at: float
    option: int | None = None  # the option pressed; TIMED_OUT when it expired
    pressed_by: str = ""  # who pressed, "<channel>:<user_id>"
    pressed_name: str = ""
    press_id: str = ""  # the platform's id of the press, so a redelivery counts once
    message_id: str = ""  # the platform message the buttons are under, as the press said
    pressed_at: float | None = None
    outcome: str = ""  # the line the message shows after the press

    @property
    def pressed_option(self) -> ChoiceOption | None:
        """The option pressed (None: not pressed, or it expired)."""
        if self.option is None or not 0 <= self.option < len(self.options):
            return None
        return self.options[self.option]


class ChoiceStore(Protocol):
    """Choices offered with buttons and their presses."""

    async def choice_add(self, choice: Choice) -> None:
        """Store an offered choice; one whose id is stored already is left as it is."""
        ...

    async def choice_get(self, choice_id: str) -> Choice | None: ...
    async def choice_press(
        self,
        choice_id: str,
        *,
        option: int,
        by: str,
        name: str,
        press_id: str,
        message_id: str,
        at: float,
    ) -> bool:
        """Record a press of `option` (TIMED_OUT: nobody answered in time) on a pending
        choice; False when it was no longer pending (someone else's press came first)."""
        ...

    async def choice_finish(self, choice_id: str, outcome: str, *, at: float) -> bool:
        """Move a pressed choice to done, with the line its message shows; False when it
        was not pressed (done already)."""
        ...

    async def choices_unfinished(self, *, expired_by: float) -> list[Choice]:
        """Choices whose press is recorded but not acted on, and pending ones that expired
        by `expired_by`, oldest first."""
        ...


COLUMNS = (
    "id, kind, session_key, address, owner, owner_name, text, options, payload, reply_id,"
    " status, created_at, expires_at, option_index, pressed_by, pressed_name, press_id,"
    " message_id, pressed_at, outcome"
)
# The columns choice_add fills: a choice as offered, nobody having pressed it yet.
_NEW = COLUMNS.split(", option_index")[0]


def _choice(row: Row) -> Choice:
    (cid, kind, key, address, owner, owner_name, text, options, payload, reply_id, status,
     created_at, expires_at, option, by, name, press_id, message_id, pressed_at,
     outcome) = row  # fmt: skip
    return Choice(
        id=cid,
        kind=ChoiceKind(kind),
        session_key=key,
        address=Address.from_json(address),
        owner=owner,
        owner_name=owner_name,
        text=text,
        options=tuple(ChoiceOption.from_dict(o) for o in json.loads(options)),
        payload=json.loads(payload),
        reply_id=reply_id,
        status=ChoiceStatus(status),
        created_at=float(created_at),
        expires_at=float(expires_at),
        option=None if option is None else int(option),
        pressed_by=by,
        pressed_name=name,
        press_id=press_id,
        message_id=message_id,
        pressed_at=None if pressed_at is None else float(pressed_at),
        outcome=outcome,
    )


class ChoiceTables:
    db: Db

    async def choice_add(self, choice: Choice) -> None:
        c = choice
        await self.db.execute(
            f"INSERT INTO choices({_NEW}) VALUES ({', '.join('?' * 13)})"
            " ON CONFLICT (id) DO NOTHING",
            *(c.id, str(c.kind), c.session_key, c.address.to_json(), c.owner, c.owner_name),
            *(c.text, json.dumps([o.to_dict() for o in c.options]), json.dumps(c.payload)),
            *(c.reply_id, str(c.status), c.created_at, c.expires_at),
        )

    async def choice_get(self, choice_id: str) -> Choice | None:
        row = await self.db.fetchrow(f"SELECT {COLUMNS} FROM choices WHERE id = ?", choice_id)
        return _choice(row) if row else None

    async def choice_press(
        self,
        choice_id: str,
        *,
        option: int,
        by: str,
        name: str,
        press_id: str,
        message_id: str,
        at: float,
    ) -> bool:
        pressed = await self.db.execute(
            "UPDATE choices SET status = ?, option_index = ?, pressed_by = ?, pressed_name = ?,"
            " press_id = ?, message_id = ?, pressed_at = ? WHERE id = ? AND status = ?",
            *(str(ChoiceStatus.PRESSED), option, by, name, press_id, message_id, at),
            *(choice_id, str(ChoiceStatus.PENDING)),
        )
        return pressed == 1

    async def choice_finish(self, choice_id: str, outcome: str, *, at: float) -> bool:
        done = await self.db.execute(
            "UPDATE choices SET status = ?, outcome = ?, done_at = ? WHERE id = ? AND status = ?",
            *(str(ChoiceStatus.DONE), outcome, at, choice_id, str(ChoiceStatus.PRESSED)),
        )
        return done == 1

    async def choices_unfinished(self, *, expired_by: float) -> list[Choice]:
        rows = await self.db.fetch(
            f"SELECT {COLUMNS} FROM choices WHERE status = ?"
            " OR (status = ? AND expires_at <= ?) ORDER BY created_at",
            *(str(ChoiceStatus.PRESSED), str(ChoiceStatus.PENDING), expired_by),
        )
        return [_choice(row) for row in rows]
