"""The store's part of buttons, on both stores and across two processes sharing one: a choice
as offered and as pressed, one press winning a race, what is left to act on, a snooze done
once, buttons kept with their outbox row, and answered choices pruned."""

from __future__ import annotations

import asyncio

from bot.store.base import ReminderStatus, Store
from bot.store.choices import TIMED_OUT, Choice, ChoiceKind, ChoiceOption, ChoiceStatus
from bot.store.outbox_rows import OutboxChunk
from bot.types import Address, Button, ButtonStyle

KEY = "agent:main:telegram:group:-100:topic:7"
WHERE = Address("telegram", "-100", "7", "55")


def offered(choice_id: str, *, expires_at: float = 2_000.0) -> Choice:
    return Choice(
        id=choice_id,
        kind=ChoiceKind.APPROVAL,
        session_key=KEY,
        address=WHERE,
        owner="telegram:7",
        owner_name="Mia",
        text="May I run **send_file**?",
        options=(
            ChoiceOption("✅ Approve", "approve", ButtonStyle.PRIMARY),
            ChoiceOption("❌", "deny"),
        ),
        payload={"call": {"id": "toolu_1", "input": {"path": "a.txt"}}},
        reply_id=f"choice-{choice_id}",
        status=ChoiceStatus.PENDING,
        created_at=1_000.0,
        expires_at=expires_at,
    )


async def press(store: Store, choice_id: str, option: int, by: str, at: float) -> bool:
    return await store.choice_press(
        choice_id, option=option, by=by, name=by, press_id=f"q-{by}", message_id="9", at=at
    )


async def test_a_choice_is_kept_as_offered_and_one_press_of_two_wins(
    any_store: Store, twin: Store
) -> None:
    await any_store.choice_add(offered("c1"))
    assert await twin.choice_get("c1") == offered("c1")
    assert await twin.choice_get("nope") is None
    won = await asyncio.gather(
        press(any_store, "c1", 0, "telegram:7", 1_100.0),
        press(twin, "c1", 1, "telegram:8", 1_101.0),
    )
    assert sorted(won) == [False, True]
    # Offered again under the same id (a repeated scheduled run): the press stands.
    await twin.choice_add(offered("c1"))
    pressed = await any_store.choice_get("c1")
    assert pressed is not None and pressed.status is ChoiceStatus.PRESSED
    winner = "telegram:7" if won[0] else "telegram:8"
    assert (pressed.pressed_by, pressed.press_id, pressed.message_id) == (
        winner,
        f"q-{winner}",
        "9",
    )
    assert pressed.pressed_option == pressed.options[0 if won[0] else 1]
    # Done once, with its outcome; a second finish changes nothing.
    assert await twin.choice_finish("c1", "✅ Approved by Mia.", at=1_200.0)
    assert not await any_store.choice_finish("c1", "again", at=1_201.0)
    done = await any_store.choice_get("c1")
    assert done is not None and (done.status, done.outcome) == (
        ChoiceStatus.DONE,
        "✅ Approved by Mia.",
    )


async def test_what_is_left_to_act_on(any_store: Store) -> None:
    for choice_id, expires in (("early", 1_500.0), ("late", 9_000.0), ("pressed", 9_000.0)):
        await any_store.choice_add(offered(choice_id, expires_at=expires))
    await press(any_store, "pressed", 0, "telegram:7", 1_100.0)
    assert [c.id for c in await any_store.choices_unfinished(expired_by=1_000.0)] == ["pressed"]
    left = await any_store.choices_unfinished(expired_by=2_000.0)
    assert sorted(c.id for c in left) == ["early", "pressed"]
    assert await press(any_store, "early", TIMED_OUT, "", 2_000.0)  # the sweep's expiry
    expired = await any_store.choice_get("early")
    assert expired is not None and expired.option == TIMED_OUT and expired.pressed_option is None


async def test_a_snooze_moves_a_fired_reminder_once(any_store: Store, twin: Store) -> None:
    added = await any_store.reminder_add(
        session_key=KEY, address=WHERE, creator="telegram:7", due_at=200.0, text="tea",
        created_at=100.0,
    )  # fmt: skip
    assert not await any_store.reminder_snooze(added.id, 800.0)  # it has not fired yet
    await any_store.reminder_finish(added.id, ReminderStatus.SENT, at=201.0)
    snoozed = await asyncio.gather(
        any_store.reminder_snooze(added.id, 800.0), twin.reminder_snooze(added.id, 800.0)
    )
    assert sorted(snoozed) == [False, True]
    again = await twin.reminder_get(added.id)
    assert again is not None and (again.status, again.due_at, again.fired_at) == (
        ReminderStatus.PENDING,
        800.0,
        None,
    )


async def test_buttons_ride_with_their_outbox_row_and_the_sent_message_is_found(
    any_store: Store,
) -> None:
    rows = ((Button("✅ Approve", "k1:c1:0", ButtonStyle.PRIMARY), Button("❌", "k1:c1:1")),)
    await any_store.outbox_add(
        [
            OutboxChunk("choice-c1", 0, 2, WHERE, "first"),
            OutboxChunk("choice-c1", 1, 2, WHERE, "May I?", buttons=rows),
            OutboxChunk("choice-c1/answered", 0, 1, WHERE, "May I? ✅", edit_of="12", buttons=()),
        ],
        now=1.0,
    )
    heads = await any_store.outbox_claim(["telegram"], "me", 2.0, 60.0, 10)
    assert [(r.text, r.buttons) for r in heads] == [("first", None)]
    assert await any_store.outbox_sent_id("choice-c1") is None
    await any_store.outbox_mark_sent(heads[0].id, "11", 3.0)
    assert await any_store.outbox_sent_id("choice-c1") == "11"
    (last,) = await any_store.outbox_claim(["telegram"], "me", 4.0, 60.0, 10)
    assert (last.text, last.buttons) == ("May I?", rows)
    await any_store.outbox_mark_sent(last.id, "12", 5.0)
    assert await any_store.outbox_sent_id("choice-c1") == "12"
    (edit,) = await any_store.outbox_claim(["telegram"], "me", 6.0, 60.0, 10)
    assert (edit.edit_of, edit.buttons) == ("12", ())  # an edit that takes them away


async def test_retention_prunes_answered_choices_only(any_store: Store) -> None:
    await any_store.choice_add(offered("old"))
    await any_store.choice_add(offered("open"))
    await press(any_store, "old", 0, "telegram:7", 1_100.0)
    await any_store.choice_finish("old", "done", at=1_200.0)
    pruned = await any_store.prune_before(5_000.0)
    assert pruned.choices == 1
    assert await any_store.choice_get("old") is None
    assert await any_store.choice_get("open") is not None
