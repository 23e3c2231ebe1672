"""Access decisions for every DM and group policy, admin checks and pairing codes."""

from __future__ import annotations

import random

import pytest

from bot.config import (
    AdminConfig,
    ChannelPolicyConfig,
    DmPolicy,
    GroupOverride,
    GroupPolicy,
)
from bot.sessions.access import (
    PAIRING_ALPHABET,
    AccessDecision,
    check_access,
    how_to_grant_admin,
    is_admin,
    new_pairing_code,
    normalize_code,
)
from bot.types import Address, ChatType, InboundMessage
from channels.slack.config import SlackConfig
from channels.telegram.config import TelegramConfig


def dm(user_id: str = "111", channel: str = "telegram") -> InboundMessage:
    return InboundMessage(
        channel=channel,
        message_id="1",
        chat_type=ChatType.DIRECT,
        chat_id=user_id,
        user_id=user_id,
        text="hi",
        address=Address(channel, user_id),
    )


def group(chat_id: str = "-100", user_id: str = "111", channel: str = "telegram") -> InboundMessage:
    chat_type = ChatType.GROUP if channel == "telegram" else ChatType.CHANNEL
    return InboundMessage(
        channel=channel,
        message_id="1",
        chat_type=chat_type,
        chat_id=chat_id,
        user_id=user_id,
        text="hi",
        address=Address(channel, chat_id),
    )


def check(
    msg: InboundMessage,
    policy: ChannelPolicyConfig | None,
    admin: bool = False,
    paired: bool = False,
) -> str:
    decision = check_access(msg, policy, is_admin=admin, is_paired=paired)
    assert isinstance(decision, AccessDecision)
    assert decision.reason
    assert decision.allowed is (decision.action == "allow")
    return decision.action


# --- decision object --------------------------------------------------------------------------


def test_decision_allowed_property() -> None:
    assert AccessDecision("allow", "x").allowed is True
    for action in ("deny", "pair", "ignore"):
        assert AccessDecision(action, "x").allowed is False


def test_decision_is_frozen() -> None:
    decision = AccessDecision("allow", "x")
    with pytest.raises(AttributeError):
        decision.action = "deny"  # type: ignore[misc]


# --- local and admins -------------------------------------------------------------------------


def test_local_channel_always_allowed() -> None:
    local = dm("me", channel="local")
    assert check(local, None) == "allow"
    assert check_access(local, None, is_admin=False, is_paired=False).reason == "local channel"


@pytest.mark.parametrize("dm_policy", ["allowlist", "open", "pairing", "disabled"])
def test_admin_allowed_in_every_dm_policy(dm_policy: DmPolicy) -> None:
    cfg = TelegramConfig(dm_policy=dm_policy)
    assert check(dm("999"), cfg, admin=True) == "allow"


@pytest.mark.parametrize("group_policy", ["open", "allowlist", "disabled"])
def test_admin_allowed_in_every_group_policy(group_policy: GroupPolicy) -> None:
    cfg = TelegramConfig(group_policy=group_policy, groups={"-100": GroupOverride(allow=False)})
    assert check(group("-100"), cfg, admin=True) == "allow"


# --- DM policies ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dm_policy", "allow_from", "paired", "expected"),
    [
        ("disabled", [], False, "deny"),
        ("disabled", ["111"], True, "deny"),
        ("disabled", ["*"], False, "deny"),
        ("open", [], False, "allow"),
        ("open", ["222"], False, "allow"),
        ("allowlist", [], False, "deny"),
        ("allowlist", ["111"], False, "allow"),
        ("allowlist", ["222"], False, "deny"),
        ("allowlist", ["222"], True, "deny"),  # pairing approvals do not extend an allowlist
        ("allowlist", ["*"], False, "allow"),
        ("pairing", [], False, "pair"),
        ("pairing", [], True, "allow"),
        ("pairing", ["111"], False, "allow"),
        ("pairing", ["222"], False, "pair"),
        ("pairing", ["222"], True, "allow"),
        ("pairing", ["*"], False, "allow"),
    ],
)
def test_dm_policies(
    dm_policy: DmPolicy, allow_from: list[str], paired: bool, expected: str
) -> None:
    cfg = TelegramConfig(dm_policy=dm_policy, allow_from=allow_from)
    assert check(dm("111"), cfg, paired=paired) == expected


def test_default_dm_policy_is_allowlist_and_denies_strangers() -> None:
    assert check(dm("111"), TelegramConfig()) == "deny"


def test_allow_from_is_case_insensitive_and_trimmed() -> None:
    cfg = SlackConfig(dm_policy="allowlist", allow_from=[" u0abc "])
    assert check(dm("U0ABC", channel="slack"), cfg) == "allow"


def test_allow_from_accepts_principal_form() -> None:
    cfg = SlackConfig(dm_policy="allowlist", allow_from=["slack:U0ABC"])
    assert check(dm("U0ABC", channel="slack"), cfg) == "allow"
    other = SlackConfig(dm_policy="allowlist", allow_from=["telegram:U0ABC"])
    assert check(dm("U0ABC", channel="slack"), other) == "deny"


def test_allow_from_is_exact_not_substring() -> None:
    cfg = TelegramConfig(dm_policy="allowlist", allow_from=["1111", "11", ""])
    assert check(dm("111"), cfg) == "deny"


def test_dm_policy_ignores_group_overrides() -> None:
    cfg = TelegramConfig(dm_policy="open", groups={"111": GroupOverride(allow=False)})
    assert check(dm("111"), cfg) == "allow"


# --- group / channel policies -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("group_policy", "allow", "expected"),
    [
        ("disabled", None, "ignore"),
        ("disabled", True, "ignore"),
        ("disabled", False, "ignore"),
        ("allowlist", None, "ignore"),
        ("allowlist", True, "allow"),
        ("allowlist", False, "ignore"),
        ("open", None, "allow"),
        ("open", True, "allow"),
        ("open", False, "ignore"),
    ],
)
def test_group_policies(group_policy: GroupPolicy, allow: bool | None, expected: str) -> None:
    cfg = TelegramConfig(group_policy=group_policy, groups={"-100": GroupOverride(allow=allow)})
    assert check(group("-100"), cfg) == expected
    slack = SlackConfig(group_policy=group_policy, channels={"C1": GroupOverride(allow=allow)})
    assert check(group("C1", user_id="U1", channel="slack"), slack) == expected


def test_group_without_override() -> None:
    assert check(group("-999"), TelegramConfig(group_policy="open")) == "allow"
    assert check(group("-999"), TelegramConfig(group_policy="allowlist")) == "ignore"
    assert check(group("-999"), TelegramConfig(group_policy="disabled")) == "ignore"


def test_group_access_ignores_dm_settings() -> None:
    # Pairing and allow_from grant DM access only; a group is judged on group settings.
    cfg = TelegramConfig(dm_policy="disabled", allow_from=[], group_policy="open")
    assert check(group("-100", user_id="stranger"), cfg) == "allow"
    locked = TelegramConfig(group_policy="allowlist", allow_from=["111"])
    assert check(group("-100", user_id="111"), locked, paired=True) == "ignore"


def test_group_override_lookup_is_case_insensitive() -> None:
    cfg = SlackConfig(group_policy="allowlist", channels={"c0abc": GroupOverride(allow=True)})
    assert check(group("C0ABC", channel="slack"), cfg) == "allow"


def test_reasons_are_short() -> None:
    cfg = TelegramConfig(group_policy="allowlist")
    for msg in (dm(), group()):
        reason = check_access(msg, cfg, is_admin=False, is_paired=False).reason
        assert 0 < len(reason) <= 40 and "\n" not in reason


# --- is_admin ---------------------------------------------------------------------------------


def test_is_admin() -> None:
    admins = AdminConfig(users=["telegram:12345", "slack:U0123ABC"])
    assert is_admin("telegram:12345", admins)
    assert is_admin("slack:U0123ABC", admins)
    assert is_admin("SLACK:u0123abc", admins)
    assert is_admin(" telegram:12345 ", AdminConfig(users=[" telegram:12345"]))
    assert not is_admin("telegram:1234", admins)
    assert not is_admin("slack:12345", admins)
    assert not is_admin("12345", admins)
    assert not is_admin("telegram:12345", AdminConfig())


def test_local_users_are_admins_unless_turned_off() -> None:
    assert is_admin("local:alice", AdminConfig())
    assert not is_admin("local:alice", AdminConfig(local_is_admin=False))
    assert is_admin("local:root", AdminConfig(local_is_admin=False, users=["local:root"]))
    # Only the channel part counts: a Telegram user named "local" is no one special.
    assert not is_admin("telegram:local", AdminConfig())


def test_how_to_grant_admin_names_the_key() -> None:
    assert how_to_grant_admin("telegram:123") == 'add "telegram:123" to admin.users in krill.toml'
    assert "admin.local_is_admin = true" in how_to_grant_admin("local:bob")


# --- pairing codes ----------------------------------------------------------------------------


def test_new_pairing_code_shape() -> None:
    for _ in range(200):
        code = new_pairing_code()
        assert len(code) == 8
        assert set(code) <= set("ABCDEFGHJKLMNPQRSTUVWXYZ23456789")  # no 0/O or 1/I to confuse


def test_new_pairing_code_is_random() -> None:
    assert len({new_pairing_code() for _ in range(50)}) > 45


def test_new_pairing_code_with_seeded_rng_is_reproducible() -> None:
    a = new_pairing_code(random.Random(7))
    b = new_pairing_code(random.Random(7))
    assert a == b
    assert len(a) == 8 and set(a) <= set(PAIRING_ALPHABET)


def test_normalize_code() -> None:
    assert normalize_code("  abcd2345\n") == "ABCD2345"
    assert normalize_code("ABCD2345") == "ABCD2345"
    code = new_pairing_code()
    assert normalize_code(code.lower()) == code
