"""Command parsing and authorization rules."""

from __future__ import annotations

import dataclasses

import pytest

from bot.commands import Command, addressed, authorized, parse_command
from bot.types import ChatType
from tests.app_harness import message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("/status", Command("status", "")),
        ("  /STATUS  ", Command("status", "")),
        ("/status@krill_bot", Command("status", "")),
        ("/compact keep the API notes", Command("compact", "keep the API notes")),
        ("/status@other_bot", None),
        ("/start", None),
        ("status", None),
        ("hello /status", None),
        ("/", None),
        ("/compact\nkeep the API notes", Command("compact", "keep the API notes")),
        ("/status\tnow", Command("status", "now")),
    ],
)
def test_parse_command(text: str, expected: Command | None) -> None:
    assert parse_command(text, "krill_bot") == expected


def test_authorization_rules() -> None:
    dm = message("/reset")
    group = message("/reset", chat_type=ChatType.GROUP, chat_id="g")
    for name in ("status", "reset", "new"):
        assert authorized(Command(name, ""), dm, admin=False, shared_dm=False)
        assert not authorized(Command(name, ""), group, admin=False, shared_dm=False)
        assert authorized(Command(name, ""), group, admin=True, shared_dm=False)
        # With dm_scope = "main" every DM is the operator's session: admins only.
        assert not authorized(Command(name, ""), dm, admin=False, shared_dm=True)
        assert authorized(Command(name, ""), dm, admin=True, shared_dm=True)
    for name in ("help", "whoami"):
        assert authorized(Command(name, ""), group, admin=False, shared_dm=False)
        assert authorized(Command(name, ""), dm, admin=False, shared_dm=True)
    for name in ("stop", "compact"):  # docs/contracts.md grants these to admins only
        assert not authorized(Command(name, ""), dm, admin=False, shared_dm=False)
        assert authorized(Command(name, ""), dm, admin=True, shared_dm=False)


def test_commands_in_slack_channels_count_only_when_addressed() -> None:
    channel = message("/status", chat_type=ChatType.CHANNEL, chat_id="C1")
    assert not addressed(channel)
    assert addressed(dataclasses.replace(channel, mentioned=True))
    assert addressed(dataclasses.replace(channel, is_command_surface=True))
    assert addressed(message("/status"))  # a DM
    assert addressed(message("/status", chat_type=ChatType.GROUP, chat_id="g"))
