"""Typed configuration: one TOML file, `KRILL_<SECTION>__<KEY>` overrides, conventional secrets.

Every default lives here, beside its key. Unknown keys and wrong types raise `ConfigError`
naming the key and the file, so a typo never silently falls back to a default.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from bot.errors import ConfigError

ENV_PREFIX = "KRILL_"
CONFIG_ENV = "KRILL_CONFIG"
DEFAULT_CONFIG_NAME = "krill.toml"


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class AgentConfig(Section):
    model: str = "claude-sonnet-4-6"
    max_tokens: int = Field(4096, gt=0)
    context_window: int = Field(200_000, gt=1000)
    timezone: str = "UTC"
    max_tool_iterations: int = Field(12, gt=0)
    max_concurrent_turns: int = Field(8, gt=0)
    queue_cap: int = Field(20, gt=0)  # messages merged into one follow-up turn at most


class AnthropicConfig(Section):
    api_key: str = ""
    base_url: str = ""
    cache_ttl: Literal["5m", "1h"] = "5m"
    max_retries: int = Field(2, ge=0)
    timeout: float = Field(600.0, gt=0)


class WorkspaceConfig(Section):
    path: str = "workspace"
    file_max_chars: int = Field(20_000, gt=100)
    total_max_chars: int = Field(60_000, gt=100)


class StorageConfig(Section):
    url: str = "sqlite:///data/krill.db"


class ServerConfig(Section):
    host: str = "127.0.0.1"
    port: int = Field(8787, ge=0, le=65535)
    max_body_bytes: int = Field(1_048_576, gt=0)


class AdminConfig(Section):
    users: list[str] = Field(default_factory=list)


class SessionConfig(Section):
    dm_scope: Literal["main", "per-peer", "per-channel-peer"] = "per-channel-peer"
    identity_links: dict[str, list[str]] = Field(default_factory=dict)


class ToolFilterConfig(Section):
    """A `tools = {allow, deny}` table on a channel, group or DM: narrows the global [tools]."""

    allow: list[str] = Field(default_factory=lambda: ["*"])
    deny: list[str] = Field(default_factory=list)


class PeerOverride(Section):
    """Per-user (`dms."<id>"`) settings."""

    history_limit: int | None = Field(None, ge=0)
    tools: ToolFilterConfig | None = None  # applies in this user's DM only


class GroupOverride(Section):
    """Per-group / per-channel settings."""

    require_mention: bool | None = None
    history_limit: int | None = Field(None, ge=0)
    allow: bool | None = None
    tools: ToolFilterConfig | None = None


DmPolicy = Literal["allowlist", "open", "pairing", "disabled"]
GroupPolicy = Literal["open", "allowlist", "disabled"]


class ChannelPolicyConfig(Section):
    """Access and history settings shared by the chat platforms."""

    enabled: bool = False
    dm_policy: DmPolicy = "allowlist"
    allow_from: list[str] = Field(default_factory=list)
    group_policy: GroupPolicy = "open"
    require_mention: bool = True
    dm_history_limit: int = Field(0, ge=0)
    history_limit: int = Field(0, ge=0)
    group_buffer_limit: int = Field(50, ge=0)
    dms: dict[str, PeerOverride] = Field(default_factory=dict)
    tools: ToolFilterConfig = Field(default_factory=ToolFilterConfig)  # every chat on the channel

    def group_overrides(self) -> Mapping[str, GroupOverride]:
        raise NotImplementedError


class TelegramConfig(ChannelPolicyConfig):
    token: str = ""
    mode: Literal["polling", "webhook"] = "polling"
    api_base_url: str = "https://api.telegram.org"
    webhook_url: str = ""
    webhook_secret: str = ""
    groups: dict[str, GroupOverride] = Field(default_factory=dict)
    stream_interval: float = Field(1.5, ge=0)  # seconds between draft edits; 0 disables streaming

    def group_overrides(self) -> Mapping[str, GroupOverride]:
        return self.groups


class SlackConfig(ChannelPolicyConfig):
    bot_token: str = ""
    app_token: str = ""
    signing_secret: str = ""
    mode: Literal["socket", "http"] = "socket"
    api_base_url: str = "https://slack.com/api/"
    channels: dict[str, GroupOverride] = Field(default_factory=dict)
    stream_interval: float = Field(1.5, ge=0)
    allow_bots: bool = False  # answer other bots' messages (never the bot's own)

    def group_overrides(self) -> Mapping[str, GroupOverride]:
        return self.channels


class LocalConfig(Section):
    enabled: bool = True  # the web chat at `/`; `krill chat` works regardless
    # Required (as ?token= or a Bearer header) when the server listens beyond loopback;
    # without it the web chat stays off there, since its sessions see private memory.
    token: str = ""


class WebFetchConfig(Section):
    allow_private: bool = False
    max_chars: int = Field(50_000, gt=0)
    timeout: float = Field(20.0, gt=0)  # seconds for the whole fetch, redirects included
    max_bytes: int = Field(2_000_000, gt=0)  # response bodies are read up to this size
    max_redirects: int = Field(5, ge=0)


class ToolResultsConfig(Section):
    """Large tool results are kept whole on disk; the model gets a preview and an id."""

    threshold_bytes: int = Field(30_000, ge=10_000)
    preview_lines: int = Field(200, ge=1)
    keep_days: int = Field(7, ge=1)


class ToolsConfig(Section):
    allow: list[str] = Field(default_factory=lambda: ["*"])
    deny: list[str] = Field(default_factory=list)
    admin_only: list[str] = Field(default_factory=list)  # only in turns where every sender is admin
    dm_only: list[str] = Field(default_factory=list)  # only in direct chats
    web_fetch: WebFetchConfig = Field(default_factory=WebFetchConfig)
    results: ToolResultsConfig = Field(default_factory=ToolResultsConfig)


class McpServerConfig(Section):
    command: str = ""
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    url: str = ""
    headers: dict[str, str] = Field(default_factory=dict)
    timeout: float = Field(60.0, gt=0)  # seconds per tool call
    start_timeout: float = Field(30.0, gt=0)  # seconds to connect and list tools

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if bool(self.command) == bool(self.url):
            raise ValueError("set either command (stdio) or url (streamable HTTP)")
        return self


# Server names prefix tool names as `<server>__<tool>`, so they cannot contain "__" themselves.
MCP_SERVER_NAME_RE = re.compile(r"[A-Za-z0-9-]+(?:_[A-Za-z0-9-]+)*")
MCP_SERVER_NAME_MAX = 32


class McpConfig(Section):
    servers: dict[str, McpServerConfig] = Field(default_factory=dict)
    retry_initial: float = Field(2.0, gt=0)  # seconds before the first restart of a failed server
    retry_max: float = Field(300.0, gt=0)  # the restart delay doubles up to this
    health_interval: float = Field(30.0, gt=0)  # seconds between liveness checks (tools/list)

    @field_validator("servers")
    @classmethod
    def _server_names(cls, servers: dict[str, McpServerConfig]) -> dict[str, McpServerConfig]:
        for name in servers:
            if len(name) > MCP_SERVER_NAME_MAX or not MCP_SERVER_NAME_RE.fullmatch(name):
                raise ValueError(
                    f"server name {name!r}: use letters, digits, '-' and single '_' "
                    f"(at most {MCP_SERVER_NAME_MAX} characters)"
                )
        return servers


class ContextConfig(Section):
    """Context management (DESIGN.md section 6); ratios are shares of agent.context_window."""

    reserve_tokens: int = Field(20_000, ge=0)  # compact when context > window - reserve
    keep_recent_user_turns: int = Field(3, ge=1)  # kept verbatim by compaction
    # Single tool-result cap (in memory only; the transcript keeps the original).
    tool_result_max_share: float = Field(0.3, gt=0, le=1)
    tool_result_max_chars: int = Field(400_000, gt=0)
    # Cache-TTL pruning: only once the prompt cache has expired.
    prune_soft_ratio: float = Field(0.3, ge=0, le=1)  # soft-trim above this share
    prune_hard_ratio: float = Field(0.5, ge=0, le=1)  # hard-clear above this share...
    prune_min_prunable_chars: int = Field(50_000, ge=0)  # ...with at least this much prunable
    prune_soft_trim_min_chars: int = Field(4_000, gt=0)  # results longer than this are trimmed
    prune_head_chars: int = Field(1_500, ge=0)
    prune_tail_chars: int = Field(1_500, ge=0)
    prune_keep_last_assistants: int = Field(3, ge=0)  # their tool results are never pruned
    prune_tools_allow: list[str] = Field(default_factory=lambda: ["*"])  # globs; deny wins
    prune_tools_deny: list[str] = Field(default_factory=list)
    # Compaction: staged summaries with a quality guard.
    chunk_max_share: float = Field(0.4, gt=0, le=1)  # a summary chunk's share of the window
    chunk_min_share: float = Field(0.15, gt=0, le=1)  # ...shrinking to this for big messages
    summary_retries: int = Field(1, ge=0, le=3)  # quality retries with feedback


class MemoryFlushConfig(Section):
    """The silent turn that stores durable facts before compaction and before the cache expires."""

    enabled: bool = True
    # Flush once the context reaches window - context.reserve_tokens - this.
    soft_threshold_tokens: int = Field(4_000, ge=0)
    idle: bool = True  # also flush idle sessions from the scheduler, while the cache is warm
    idle_lead_seconds: float = Field(30.0, ge=0)  # how long before the cache TTL runs out
    timeout_seconds: float = Field(120.0, gt=0)  # a flush never holds a person's turn longer


class MemorySearchConfig(Section):
    max_results: int = Field(6, ge=1, le=50)
    min_score: float = Field(0.3, ge=0, le=1)  # share of the query's terms a snippet must hold
    recall: bool = True  # attach the top snippets to every person's turn
    snippet_max_chars: int = Field(700, ge=100)
    recall_max_chars: int = Field(3_000, ge=200)  # all recalled snippets of one turn together


class MemoryConfig(Section):
    enabled: bool = True
    chunk_tokens: int = Field(400, ge=50)
    chunk_overlap_tokens: int = Field(80, ge=0)
    reindex_interval_seconds: float = Field(60.0, ge=0)  # 0: only the check before each search
    append_max_chars: int = Field(4_000, gt=0)  # one memory_append entry
    file_max_bytes: int = Field(1_000_000, gt=0)  # memory_append refuses to grow a file past it
    flush: MemoryFlushConfig = Field(default_factory=MemoryFlushConfig)
    search: MemorySearchConfig = Field(default_factory=MemorySearchConfig)


class SchedulerConfig(Section):
    """Timed housekeeping: idle compaction, the heartbeat, and test-only timing overrides."""

    heartbeat_minutes: float = Field(0.0, ge=0)  # 0 turns the heartbeat off
    heartbeat_session: str = ""  # session key; "" = the most recently active DM session
    idle_compaction: bool = True  # compact large idle sessions once their cache has expired
    # Overrides the TTL implied by anthropic.cache_ttl (tests use seconds); read it only
    # through `Config.cache_ttl_seconds`.
    cache_ttl_seconds: float | None = Field(None, gt=0)


class Config(Section):
    agent: AgentConfig = Field(default_factory=AgentConfig)
    anthropic: AnthropicConfig = Field(default_factory=AnthropicConfig)
    workspace: WorkspaceConfig = Field(default_factory=WorkspaceConfig)
    storage: StorageConfig = Field(default_factory=StorageConfig)
    server: ServerConfig = Field(default_factory=ServerConfig)
    admin: AdminConfig = Field(default_factory=AdminConfig)
    session: SessionConfig = Field(default_factory=SessionConfig)
    telegram: TelegramConfig = Field(default_factory=TelegramConfig)
    slack: SlackConfig = Field(default_factory=SlackConfig)
    local: LocalConfig = Field(default_factory=LocalConfig)
    tools: ToolsConfig = Field(default_factory=ToolsConfig)
    mcp: McpConfig = Field(default_factory=McpConfig)
    context: ContextConfig = Field(default_factory=ContextConfig)
    memory: MemoryConfig = Field(default_factory=MemoryConfig)
    scheduler: SchedulerConfig = Field(default_factory=SchedulerConfig)

    # Where the file was read from (None: defaults); relative paths resolve against base_dir.
    source: Path | None = Field(default=None, exclude=True)
    base_dir: Path = Field(default_factory=Path.cwd, exclude=True)

    def channel_policy(self, channel: str) -> ChannelPolicyConfig | None:
        """The access/history settings of a chat platform (None for the local channel)."""
        policy = getattr(self, channel, None)
        return policy if isinstance(policy, ChannelPolicyConfig) else None

    @property
    def cache_ttl_seconds(self) -> float:
        """How long the prompt cache stays warm: the one source for pruning, flush and
        compaction timing (pricing reads `anthropic.cache_ttl`, the TTL actually bought)."""
        if self.scheduler.cache_ttl_seconds is not None:
            return self.scheduler.cache_ttl_seconds
        return 3600.0 if self.anthropic.cache_ttl == "1h" else 300.0

    def resolve(self, path: str) -> Path:
        p = Path(path).expanduser()
        return p if p.is_absolute() else (self.base_dir / p)

    @property
    def workspace_dir(self) -> Path:
        return self.resolve(self.workspace.path)

    @property
    def sqlite_path(self) -> Path:
        url = self.storage.url
        if not url.startswith("sqlite:///"):
            raise ConfigError(f"storage.url: only sqlite:/// URLs are supported, got {url!r}")
        rest = url[len("sqlite:///") :]
        return Path(rest) if rest.startswith("/") else self.resolve(rest)


# Conventional variables that fill secrets (and the model base URL) left empty in the config.
SECRET_ENV: dict[tuple[str, str], str] = {
    ("anthropic", "api_key"): "ANTHROPIC_API_KEY",
    ("anthropic", "base_url"): "ANTHROPIC_BASE_URL",
    ("telegram", "token"): "TELEGRAM_BOT_TOKEN",
    ("slack", "bot_token"): "SLACK_BOT_TOKEN",
    ("slack", "app_token"): "SLACK_APP_TOKEN",
    ("slack", "signing_secret"): "SLACK_SIGNING_SECRET",
}


def find_config_path(explicit: str | None, env: Mapping[str, str] | None = None) -> Path | None:
    """`--config`, else `$KRILL_CONFIG`, else `./krill.toml` if it exists, else None (defaults)."""
    env = os.environ if env is None else env
    if explicit:
        path = Path(explicit).expanduser()
        if not path.is_file():
            raise ConfigError(f"config file not found: {path}")
        return path
    if env.get(CONFIG_ENV):
        path = Path(env[CONFIG_ENV]).expanduser()
        if not path.is_file():
            raise ConfigError(f"config file not found: {path} (from ${CONFIG_ENV})")
        return path
    default = Path.cwd() / DEFAULT_CONFIG_NAME
    return default if default.is_file() else None


def _parse_env_value(raw: str) -> Any:
    """Env values are TOML/JSON literals when they parse as one (10, true, ["a"]), else strings."""
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        pass
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def env_overrides(env: Mapping[str, str]) -> dict[str, Any]:
    """Turn `KRILL_TELEGRAM__MODE=webhook` into `{"telegram": {"mode": "webhook"}}`."""
    result: dict[str, Any] = {}
    for name, raw in env.items():
        if not name.startswith(ENV_PREFIX) or name == CONFIG_ENV or "__" not in name:
            continue
        parts = [p.lower() for p in name[len(ENV_PREFIX) :].split("__")]
        node = result
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"{name}: conflicts with another KRILL_ variable")
        node[parts[-1]] = _parse_env_value(raw)
    return result


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _format_validation(err: ValidationError, where: str) -> str:
    lines = []
    for e in err.errors():
        key = ".".join(str(p) for p in e["loc"]) or "(top level)"
        if e["type"] == "extra_forbidden":
            msg = "unknown key"
        else:
            msg = e["msg"]
            if "input" in e and not isinstance(e["input"], dict | list):
                msg += f" (got {e['input']!r})"
        lines.append(f"{where}: {key}: {msg}")
    return "\n".join(lines)


def load_config(path: str | None = None, env: Mapping[str, str] | None = None) -> Config:
    """Load, merge and validate. Raises ConfigError with a message meant for a person."""
    env = dict(os.environ if env is None else env)
    source = find_config_path(path, env)
    data: dict[str, Any] = {}
    if source is not None:
        try:
            data = tomllib.loads(source.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{source}: not valid TOML: {exc}") from exc
        except OSError as exc:
            raise ConfigError(f"{source}: cannot read: {exc}") from exc
    overrides = env_overrides(env)
    merged = _merge(data, overrides)
    where = str(source) if source else "defaults"
    if overrides:
        where += " + KRILL_* environment"
    try:
        config = Config.model_validate(merged)
    except ValidationError as exc:
        raise ConfigError(_format_validation(exc, where)) from None
    config.source = source
    config.base_dir = source.parent.resolve() if source else Path.cwd()
    for (section, key), var in SECRET_ENV.items():
        sect = getattr(config, section)
        if not getattr(sect, key) and env.get(var):
            setattr(sect, key, env[var])
    _check_consistency(config, where)
    return config


def _check_consistency(config: Config, where: str) -> None:
    problems = []
    tg = config.telegram
    if tg.enabled and not tg.token:
        problems.append(
            "telegram.token: required when telegram.enabled (or set TELEGRAM_BOT_TOKEN)"
        )
    if tg.enabled and tg.mode == "webhook" and not tg.webhook_secret:
        problems.append("telegram.webhook_secret: required in webhook mode")
    sl = config.slack
    if sl.enabled and not sl.bot_token:
        problems.append("slack.bot_token: required when slack.enabled (or set SLACK_BOT_TOKEN)")
    if sl.enabled and sl.mode == "socket" and not sl.app_token:
        problems.append("slack.app_token: required in socket mode (or set SLACK_APP_TOKEN)")
    if sl.enabled and sl.mode == "http" and not sl.signing_secret:
        problems.append("slack.signing_secret: required in http mode (or set SLACK_SIGNING_SECRET)")
    for user in config.admin.users:
        if ":" not in user:
            problems.append(f"admin.users: {user!r} must look like '<channel>:<user_id>'")
    try:
        from zoneinfo import ZoneInfo

        ZoneInfo(config.agent.timezone)
    except Exception:
        problems.append(f"agent.timezone: unknown time zone {config.agent.timezone!r}")
    if problems:
        raise ConfigError("\n".join(f"{where}: {p}" for p in problems))
