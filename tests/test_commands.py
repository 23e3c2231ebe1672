"""Command parsing and authorization rules."""

from __future__ import annotations

import pytest

from bot.commands import Command, authorized, parse_command
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
        assert authorized(Command(name, ""), dm, admin=False)
        assert not authorized(Command(name, ""), group, admin=False)
        assert authorized(Command(name, ""), group, admin=True)
    for name in ("help", "whoami"):
        assert authorized(Command(name, ""), group, admin=False)
    for name in ("stop", "compact"):  # DESIGN grants these to admins only
        assert not authorized(Command(name, ""), dm, admin=False)
        assert authorized(Command(name, ""), dm, admin=True)
