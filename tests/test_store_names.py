"""Names beside session keys, on both stores: kept as last seen and read by another
process, shown for the session they belong to (a DM's person, a topic's or a chat's title),
written only when they change, and deleted by retention with the last session of theirs."""

from __future__ import annotations

from bot.gateway.names import DisplayNames, names_in
from bot.store.base import Store
from bot.store.names import NameKey, NameKind, name_of_session
from bot.store.store import SqlStore
from bot.types import Address, ChatType, InboundMessage, SessionOrigin

ADA = NameKey("telegram", NameKind.PERSON, "42")
OPS = NameKey("telegram", NameKind.CHAT, "-100")
LAUNCH = NameKey("telegram", NameKind.TOPIC, "-100:7")
GENERAL = NameKey("slack", NameKind.CHAT, "C1")
STRANGER = NameKey("telegram", NameKind.PERSON, "99")

DM = SessionOrigin("telegram", ChatType.DIRECT, "42", peer_id="42")
GROUP = SessionOrigin("telegram", ChatType.GROUP, "-100")
TOPIC = SessionOrigin("telegram", ChatType.GROUP, "-100", thread_id="7")
OTHER_TOPIC = SessionOrigin("telegram", ChatType.GROUP, "-100", thread_id="8")


def said(chat_type: ChatType, **fields: str) -> InboundMessage:
    chat_id = fields.pop("chat_id", "42")
    return InboundMessage(
        channel="telegram",
        message_id="m1",
        chat_type=chat_type,
        chat_id=chat_id,
        user_id="42",
        text="hi",
        address=Address("telegram", chat_id),
        **fields,  # type: ignore[arg-type]
    )


async def test_names_are_kept_shown_for_their_session_and_pruned_with_it(
    any_store: Store, twin: Store
) -> None:
    for key, name in (
        (ADA, "Ada Lovelace"),
        (OPS, "Ops room"),
        (LAUNCH, "Ops room / Launch"),
        (GENERAL, "#general"),
        (STRANGER, "Someone"),
    ):
        await any_store.name_put(key, name, at=1_000.0)
    await twin.name_put(OPS, "Ops room <b>", at=1_001.0)  # renamed: the newer one stands
    names = await twin.names_all()
    assert names[ADA] == "Ada Lovelace" and names[OPS] == "Ops room <b>"
    assert name_of_session(names, DM) == "Ada Lovelace"
    assert name_of_session(names, TOPIC) == "Ops room / Launch"
    assert name_of_session(names, OTHER_TOPIC) == "Ops room <b>"  # a topic not seen named
    assert name_of_session(names, GROUP) == "Ops room <b>"
    assert name_of_session(names, None) == ""
    assert name_of_session(names, SessionOrigin("slack", ChatType.DIRECT, "D1", peer_id="U9")) == ""

    # Retention: a name goes once no stored session is its person's, chat's or topic's.
    for key, origin in (
        ("agent:main:telegram:direct:42", DM),
        ("agent:main:telegram:group:-100", GROUP),
        ("agent:main:telegram:group:-100:topic:7", TOPIC),
    ):
        await any_store.get_or_create_session(key, origin)
    pruned = await twin.prune_before(2_000_000_000.0)
    assert pruned.names == 2
    assert set(await any_store.names_all()) == {ADA, OPS, LAUNCH}


async def test_a_name_is_written_when_it_changes_not_per_message(any_store: Store) -> None:
    assert isinstance(any_store, SqlStore)
    now = [1_000.0]
    names = DisplayNames(any_store, clock=lambda: now[0])
    dm = said(ChatType.DIRECT, user_name="Ada  Lovelace")

    async def written() -> float | None:
        row = await any_store.db.fetchrow(
            "SELECT name, updated_at FROM display_names WHERE kind = 'person'"
        )
        return None if row is None else row[1]

    await names.seen(dm)
    now[0] = 1_005.0
    await names.seen(dm)  # the same name again: no write
    assert await written() == 1_000.0
    assert (await any_store.names_all())[ADA] == "Ada Lovelace"  # spaces as one
    await names.seen(said(ChatType.DIRECT, user_name="Ada King"))
    assert await written() == 1_005.0
    assert (await any_store.names_all())[ADA] == "Ada King"


def test_which_names_a_message_tells() -> None:
    assert names_in(said(ChatType.DIRECT, user_name="Ada")) == [(ADA, "Ada")]
    assert names_in(said(ChatType.DIRECT)) == []  # no name: the key alone
    group = said(ChatType.GROUP, chat_id="-100", user_name="Ada", chat_title="Ops room")
    assert names_in(group) == [(OPS, "Ops room")]  # a member's own name is not kept
    topic = said(
        ChatType.GROUP,
        chat_id="-100",
        thread_id="7",
        chat_title="Ops room / Launch",
        topic_title="Launch",
    )
    assert names_in(topic) == [(LAUNCH, "Ops room / Launch")]
