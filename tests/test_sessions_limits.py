"""History limit resolution, the user-turn cut, and mention gating."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from bot.config import GroupOverride, PeerOverride, config_model
from bot.sessions.limits import (
    apply_turn_limit,
    history_limit_for,
    requires_mention,
    resolve_history_limit,
)
from bot.types import ChatType, SessionOrigin
from channels.registry import CHANNELS
from channels.slack.config import SlackConfig
from channels.telegram.config import TelegramConfig


def telegram(**kwargs: object) -> TelegramConfig:
    base: dict[str, object] = {
        "dm_history_limit": 20,
        "history_limit": 50,
        "dms": {"111": PeerOverride(history_limit=5), "222": PeerOverride()},
        "groups": {
            "-100": GroupOverride(history_limit=7),
            "-200": GroupOverride(require_mention=False),
            "-300": GroupOverride(history_limit=0, require_mention=True),
        },
    }
    base.update(kwargs)
    return TelegramConfig.model_validate(base)


# --- resolve_history_limit --------------------------------------------------------------------


def test_local_channel_has_no_limit() -> None:
    assert resolve_history_limit(None, ChatType.DIRECT, "me", "me") == 0
    assert resolve_history_limit(None, ChatType.GROUP, "x", "me") == 0


def test_dm_uses_per_user_override() -> None:
    assert resolve_history_limit(telegram(), ChatType.DIRECT, "111", "111") == 5


def test_dm_override_without_limit_falls_back_to_dm_default() -> None:
    assert resolve_history_limit(telegram(), ChatType.DIRECT, "222", "222") == 20


def test_dm_without_override_uses_dm_default() -> None:
    assert resolve_history_limit(telegram(), ChatType.DIRECT, "333", "333") == 20


def test_dm_ignores_group_overrides_and_group_default() -> None:
    cfg = telegram(dm_history_limit=0)
    assert resolve_history_limit(cfg, ChatType.DIRECT, "-100", "444") == 0


def test_group_uses_group_override() -> None:
    assert resolve_history_limit(telegram(), ChatType.GROUP, "-100", "5") == 7


def test_group_override_zero_means_unlimited_not_unset() -> None:
    assert resolve_history_limit(telegram(), ChatType.GROUP, "-300", "5") == 0


def test_a_sessions_recorded_origin_picks_its_limit() -> None:
    config = config_model(CHANNELS)(telegram=telegram())
    dm = SessionOrigin("telegram", ChatType.DIRECT, "111", peer_id="111")
    topic = SessionOrigin("telegram", ChatType.GROUP, "-100", thread_id="9")
    assert history_limit_for(config, dm) == 5
    assert history_limit_for(config, topic) == 7
    assert history_limit_for(config, SessionOrigin("local", ChatType.DIRECT, "me")) == 0
    assert history_limit_for(config, None) == 0  # a row whose key never parsed


def test_group_override_without_limit_falls_back_to_default() -> None:
    assert resolve_history_limit(telegram(), ChatType.GROUP, "-200", "5") == 50


def test_group_without_override_uses_history_limit() -> None:
    assert resolve_history_limit(telegram(), ChatType.GROUP, "-999", "5") == 50


def test_per_user_override_does_not_apply_in_groups() -> None:
    assert resolve_history_limit(telegram(), ChatType.GROUP, "-999", "111") == 50


def test_slack_channel_overrides() -> None:
    cfg = SlackConfig(
        dm_history_limit=3,
        history_limit=9,
        dms={"U1": PeerOverride(history_limit=1)},
        channels={"C1": GroupOverride(history_limit=4)},
    )
    assert resolve_history_limit(cfg, ChatType.CHANNEL, "C1", "U1") == 4
    assert resolve_history_limit(cfg, ChatType.CHANNEL, "C2", "U1") == 9
    assert resolve_history_limit(cfg, ChatType.DIRECT, "D1", "U1") == 1
    assert resolve_history_limit(cfg, ChatType.DIRECT, "D2", "U2") == 3


def test_override_lookup_is_case_insensitive() -> None:
    cfg = SlackConfig(
        dms={"u1": PeerOverride(history_limit=1)},
        channels={"c1": GroupOverride(history_limit=4)},
    )
    assert resolve_history_limit(cfg, ChatType.DIRECT, "D1", "U1") == 1
    assert resolve_history_limit(cfg, ChatType.CHANNEL, "C1", "U1") == 4


def test_defaults_are_unlimited() -> None:
    assert resolve_history_limit(TelegramConfig(), ChatType.DIRECT, "1", "1") == 0
    assert resolve_history_limit(TelegramConfig(), ChatType.GROUP, "-1", "1") == 0


# --- apply_turn_limit -------------------------------------------------------------------------


@dataclass
class Item:
    role: str
    n: int


def is_user(item: Item) -> bool:
    return item.role == "user"


def conv(spec: str) -> list[Item]:
    """'uaau' -> user, assistant, assistant, user (numbered by position)."""
    roles = {"u": "user", "a": "assistant", "t": "tool"}
    return [Item(roles[c], i) for i, c in enumerate(spec)]


def shape(items: list[Item]) -> str:
    return "".join(i.role[0] for i in items)


def test_zero_keeps_everything() -> None:
    items = conv("aauatua")
    out = apply_turn_limit(items, 0, is_user)
    assert out == items
    assert out is not items


def test_keeps_last_n_user_turns() -> None:
    items = conv("uauatuaua")
    out = apply_turn_limit(items, 2, is_user)
    assert shape(out) == "uaua"
    assert [i.n for i in out] == [5, 6, 7, 8]


def test_limit_one_keeps_only_last_turn() -> None:
    items = conv("uauatua")
    out = apply_turn_limit(items, 1, is_user)
    assert shape(out) == "ua"
    assert out[0].n == 5


def test_limit_one_with_trailing_user_message() -> None:
    assert shape(apply_turn_limit(conv("uau"), 1, is_user)) == "u"


def test_tool_items_stay_with_their_turn() -> None:
    out = apply_turn_limit(conv("uatauata"), 1, is_user)
    assert shape(out) == "uata"


def test_limit_equal_to_turns_keeps_all() -> None:
    items = conv("uaua")
    assert apply_turn_limit(items, 2, is_user) == items


def test_limit_larger_than_turns_keeps_all_turns() -> None:
    items = conv("uaua")
    assert apply_turn_limit(items, 10, is_user) == items


def test_leading_non_user_items_are_dropped() -> None:
    items = conv("aatuaua")
    assert shape(apply_turn_limit(items, 10, is_user)) == "uaua"
    assert shape(apply_turn_limit(items, 1, is_user)) == "ua"


def test_result_always_starts_with_user_turn() -> None:
    for spec in ("uaua", "auaua", "taua", "uatatua"):
        for limit in (1, 2, 3, 10):
            out = apply_turn_limit(conv(spec), limit, is_user)
            assert out and out[0].role == "user"
            assert sum(map(is_user, out)) == min(limit, spec.count("u"))


def test_no_user_turns_gives_empty_history() -> None:
    assert apply_turn_limit(conv("aat"), 3, is_user) == []


def test_empty_input() -> None:
    assert apply_turn_limit([], 3, is_user) == []
    assert apply_turn_limit([], 0, is_user) == []


def test_generic_over_item_type() -> None:
    msgs = [{"role": "assistant"}, {"role": "user"}, {"role": "assistant"}]
    assert apply_turn_limit(msgs, 1, lambda m: m["role"] == "user") == msgs[1:]
    assert apply_turn_limit(("a", "U", "b", "U"), 1, str.isupper) == ["U"]


def test_negative_limit_is_rejected() -> None:
    with pytest.raises(ValueError):
        apply_turn_limit(conv("ua"), -1, is_user)


# --- requires_mention -------------------------------------------------------------------------


def test_requires_mention_default_true() -> None:
    assert requires_mention(telegram(), ChatType.GROUP, "-999") is True


def test_requires_mention_group_override() -> None:
    assert requires_mention(telegram(), ChatType.GROUP, "-200") is False
    assert requires_mention(telegram(require_mention=False), ChatType.GROUP, "-300") is True


def test_requires_mention_override_without_value_falls_back() -> None:
    assert requires_mention(telegram(require_mention=False), ChatType.GROUP, "-100") is False
    assert requires_mention(telegram(), ChatType.GROUP, "-100") is True


def test_requires_mention_policy_default_false() -> None:
    assert requires_mention(telegram(require_mention=False), ChatType.GROUP, "-999") is False


def test_requires_mention_slack_channels() -> None:
    cfg = SlackConfig(channels={"C1": GroupOverride(require_mention=False)})
    assert requires_mention(cfg, ChatType.CHANNEL, "C1") is False
    assert requires_mention(cfg, ChatType.CHANNEL, "C2") is True


def test_requires_mention_local_channel() -> None:
    assert requires_mention(None, ChatType.GROUP, "anything") is False


def test_a_direct_message_never_requires_a_mention() -> None:
    assert requires_mention(telegram(), ChatType.DIRECT, "111") is False
