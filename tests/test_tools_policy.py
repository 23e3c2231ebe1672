"""Tool policy: globs, deny wins, channel/group/DM narrowing, admin-only and DM-only rules."""

from __future__ import annotations

from typing import Any

from bot.config import Config, config_model
from bot.tools.policy import describe_tools, policy_for_messages, resolve_policy
from bot.types import Address, ChatType, InboundMessage
from channels.registry import CHANNELS

TOOLS = [
    "memory_search",
    "read_tool_result",
    "web_fetch",
    "github__create_issue",
    "github__list_prs",
    "jira__search",
]


def config(**data: Any) -> Config:
    return config_model(CHANNELS).model_validate({"admin": {"users": ["telegram:1"]}, **data})


def usable(cfg: Config, *, channel: str = "telegram", user: str = "2", group: str = "") -> list:
    policy = resolve_policy(
        cfg,
        channel=channel,
        chat_type=ChatType.GROUP if group else ChatType.DIRECT,
        chat_id=group or user,
        user_id=user,
        admin=f"{channel}:{user}" in cfg.admin.users,
    )
    return [name for name in TOOLS if policy.allows(name)]


def msg(user: str, *, chat_type: ChatType = ChatType.DIRECT, chat: str = "") -> InboundMessage:
    chat_id = chat or user
    return InboundMessage(
        "telegram", "m1", chat_type, chat_id, user, "hi", Address("telegram", chat_id)
    )


def test_defaults_allow_everything() -> None:
    assert usable(config()) == TOOLS


def test_globs_and_deny_wins() -> None:
    cfg = config(tools={"allow": ["*__*", "web_*"], "deny": ["github__create_*"]})
    assert usable(cfg) == ["web_fetch", "github__list_prs", "jira__search"]
    everything_denied = config(tools={"allow": ["*"], "deny": ["*"]})
    assert usable(everything_denied) == []


def test_channel_table_narrows_but_cannot_widen() -> None:
    cfg = config(
        tools={"deny": ["jira__*"]},
        telegram={"tools": {"allow": ["web_fetch", "jira__*"]}},
    )
    assert usable(cfg) == ["web_fetch"]  # jira stays denied globally
    assert usable(cfg, channel="slack") == [t for t in TOOLS if not t.startswith("jira")]


def test_group_override_narrows_that_group_only() -> None:
    cfg = config(telegram={"groups": {"-100": {"tools": {"deny": ["web_fetch"]}}}})
    assert "web_fetch" not in usable(cfg, group="-100")
    assert "web_fetch" in usable(cfg, group="-200")
    assert "web_fetch" in usable(cfg)


def test_dm_override_applies_in_that_dm_only() -> None:
    cfg = config(telegram={"dms": {"7": {"tools": {"allow": ["memory_*"]}}}})
    assert usable(cfg, user="7") == ["memory_search"]
    assert usable(cfg, user="7", group="-100") == TOOLS  # not in a shared group
    assert usable(cfg, user="8") == TOOLS


def test_admin_only_and_dm_only_give_mcp_tools_to_admin_dms() -> None:
    cfg = config(tools={"admin_only": ["*__*"], "dm_only": ["*__*"]})
    builtins = ["memory_search", "read_tool_result", "web_fetch"]
    assert usable(cfg, user="1") == TOOLS  # admin, DM
    assert usable(cfg, user="2") == builtins  # not an admin
    assert usable(cfg, user="1", group="-100") == builtins  # admin, but in a group


def test_admin_only_needs_every_sender_of_the_turn_to_be_admin() -> None:
    cfg = config(tools={"admin_only": ["github__*"]})
    group = [msg("1", chat_type=ChatType.GROUP, chat="-1")]
    mixed = [*group, msg("2", chat_type=ChatType.GROUP, chat="-1")]
    assert policy_for_messages(cfg, group).allows("github__list_prs")
    assert not policy_for_messages(cfg, mixed).allows("github__list_prs")
    # Internal turns (no sender) get the global rules as a non-admin.
    assert not policy_for_messages(cfg, []).allows("github__list_prs")
    assert policy_for_messages(cfg, []).allows("web_fetch")


def test_refused_by_names_the_layer() -> None:
    cfg = config(tools={"admin_only": ["*__*"]}, telegram={"tools": {"deny": ["web_fetch"]}})
    policy = policy_for_messages(cfg, [msg("2")])
    assert policy.refused_by("github__list_prs") == "tools.admin_only"
    assert policy.refused_by("web_fetch") == "telegram.tools"
    assert policy.refused_by("memory_search") is None


def test_local_channel_uses_global_rules() -> None:
    cfg = config(tools={"deny": ["web_fetch"]})
    assert usable(cfg, channel="local", user="me") == [t for t in TOOLS if t != "web_fetch"]


def test_describe_tools_groups_mcp_tools_by_server() -> None:
    assert describe_tools(TOOLS) == (
        "memory_search, read_tool_result, web_fetch · github: create_issue, list_prs · jira: search"
    )
    assert describe_tools([]) == "none"
