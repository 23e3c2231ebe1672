"""Identifier extraction for the compaction quality guard."""

from __future__ import annotations

from bot.context.identifiers import extract_identifiers, missing_identifiers

TEXT = r"""Deployed 9f3a2c1b7e to https://ci.example.com/jobs/77?x=1. Staging is 10.0.4.17:8443,
the db is db.internal.example:5432 and dev is localhost:8080. Config: /etc/krill/krill.toml,
notes in ~/notes/todo.md, code in src/app.py, ticket INC-4821, order 20481937,
request 123e4567-e89b-12d3-a456-426614174000, Windows C:\Users\bob\report.txt."""


def test_each_kind_is_found_verbatim() -> None:
    assert extract_identifiers(TEXT) == [
        "9f3a2c1b7e",
        "https://ci.example.com/jobs/77?x=1",
        "10.0.4.17:8443",
        "db.internal.example:5432",
        "localhost:8080",
        "/etc/krill/krill.toml",
        "~/notes/todo.md",
        "src/app.py",
        "INC-4821",
        "20481937",
        "123e4567-e89b-12d3-a456-426614174000",
        r"C:\Users\bob\report.txt",
    ]


def test_prose_numbers_and_words_are_not_identifiers() -> None:
    prose = (
        "and/or km/h on 1/2/2024, pi is 3.14159265, in 2026 a deadbeef defaced cafe; "
        "see /v1 or /compact, at 14:30 UTC."
    )
    assert extract_identifiers(prose) == []


def test_parts_of_a_url_are_not_reported_twice_and_order_is_kept() -> None:
    found = extract_identifiers("see http://host.example:9000/a/b.txt then /a/b.txt again")
    assert found == ["http://host.example:9000/a/b.txt", "/a/b.txt"]
    assert extract_identifiers("id abc12345def, again abc12345def.") == ["abc12345def"]


def test_missing_identifiers_are_checked_verbatim() -> None:
    summary = "We deployed 9F3A2C1B7E from /etc/krill/krill.toml"
    assert missing_identifiers(summary, ["9f3a2c1b7e", "/etc/krill/krill.toml"]) == ["9f3a2c1b7e"]
