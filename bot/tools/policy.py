"""Which tools a session may use: the global [tools] lists narrowed by channel, group and DM
tables and by the admin-only and DM-only rules.

Pure functions over the config. Every layer is a filter a tool must pass (its allow globs
match and none of its deny globs do), so a narrower layer can only take tools away, and a
deny anywhere wins.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bot.config import Config, ToolFilterConfig
from bot.sessions.access import all_admins
from bot.sessions.limits import group_override, peer_override
from bot.tools.registry import tool_allowed
from bot.types import ChatType, InboundMessage

EVERYTHING = ("*",)
MCP_SEPARATOR = "__"
MCP_PREFIX = "mcp:"


@dataclass(frozen=True, slots=True)
class PolicyLayer:
    """One allow/deny pair and the config key it came from (for explanations)."""

    source: str
    allow: tuple[str, ...] = EVERYTHING
    deny: tuple[str, ...] = ()

    def allows(self, name: str) -> bool:
        return tool_allowed(name, self.allow, self.deny)


@dataclass(frozen=True, slots=True)
class ToolPolicy:
    """The effective policy of a turn: a tool is usable when every layer allows it, and one
    matching `confirm` runs only once the person who asked approves it."""

    layers: tuple[PolicyLayer, ...]
    confirm: tuple[str, ...] = ()

    def allows(self, name: str) -> bool:
        return all(layer.allows(name) for layer in self.layers)

    def confirms(self, name: str) -> bool:
        return tool_allowed(name, self.confirm, ())

    def refused_by(self, name: str) -> str | None:
        """The config key of the first layer that takes `name` away, or None if allowed."""
        return next((layer.source for layer in self.layers if not layer.allows(name)), None)


def tool_globs(entries: Sequence[str]) -> tuple[str, ...]:
    """Tool-name globs from config entries, where `mcp:<server glob>` names that server's
    MCP tools (`mcp:*`: every MCP tool)."""
    return tuple(
        f"{entry[len(MCP_PREFIX) :]}{MCP_SEPARATOR}*" if entry.startswith(MCP_PREFIX) else entry
        for entry in entries
    )


def _layer(source: str, table: ToolFilterConfig) -> PolicyLayer:
    return PolicyLayer(source, tuple(table.allow), tuple(table.deny))


def resolve_policy(
    config: Config,
    *,
    channel: str,
    chat_type: ChatType,
    chat_id: str,
    user_id: str,
    admin: bool,
) -> ToolPolicy:
    """The policy for a conversation, from the global lists down to its own override.

    A DM override (`<channel>.dms."<id>".tools`) describes that person's own DM, so it is
    consulted in DMs only; group and channel overrides apply to the shared chat.
    """
    tools = config.tools
    confirm = list(tools.policy.confirm)
    if chat_type != ChatType.DIRECT:
        confirm += tools.policy.confirm_in_groups
    layers = [PolicyLayer("tools", tuple(tools.allow), tuple(tools.deny))]
    if not admin and tools.admin_only:
        layers.append(PolicyLayer("tools.admin_only", deny=tuple(tools.admin_only)))
    if chat_type != ChatType.DIRECT and tools.dm_only:
        layers.append(PolicyLayer("tools.dm_only", deny=tuple(tools.dm_only)))
    policy = config.channel_policy(channel)
    if policy is not None:
        layers.append(_layer(f"{channel}.tools", policy.tools))
        if chat_type == ChatType.DIRECT:
            peer = peer_override(policy, user_id)
            if peer is not None and peer.tools is not None:
                layers.append(_layer(f'{channel}.dms."{user_id}".tools', peer.tools))
        else:
            group = group_override(policy, chat_id)
            if group is not None and group.tools is not None:
                layers.append(_layer(f'{channel} group "{chat_id}" tools', group.tools))
    return ToolPolicy(tuple(layers), tool_globs(confirm))


def policy_for_messages(config: Config, messages: Sequence[InboundMessage]) -> ToolPolicy:
    """The policy of a turn answering `messages` (all from one conversation).

    Admin-only tools need every sender of the turn to be an admin: messages queued while
    the bot was busy are answered together, and one of them may come from someone else.
    With no messages (internal turns such as a memory flush) only the global rules apply,
    as for a non-admin in a DM.
    """
    if not messages:
        return resolve_policy(
            config, channel="", chat_type=ChatType.DIRECT, chat_id="", user_id="", admin=False
        )
    first = messages[0]
    return resolve_policy(
        config,
        channel=first.channel,
        chat_type=first.chat_type,
        chat_id=first.chat_id,
        user_id=first.user_id,
        admin=all_admins(messages, config.admin),
    )


def describe_tools(names: Sequence[str]) -> str:
    """`/status` text for the usable tools: built-ins first, then MCP tools by server."""
    builtin = [n for n in names if MCP_SEPARATOR not in n]
    servers: dict[str, list[str]] = {}
    for name in names:
        if MCP_SEPARATOR in name:
            server, _, tool = name.partition(MCP_SEPARATOR)
            servers.setdefault(server, []).append(tool)
    parts = [", ".join(builtin)] if builtin else []
    parts += [f"{server}: {', '.join(tools)}" for server, tools in sorted(servers.items())]
    return " · ".join(parts) if parts else "none"
