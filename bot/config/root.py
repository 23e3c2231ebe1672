"""The whole configuration: one typed model with a field per TOML section, and the paths
and timings derived from it.

The chat channels' sections (`[telegram]`, `[slack]`, `[local]`) are not named here: each
channel's package defines its own, and `config_model` adds one field per channel to the
core sections, from the registry a composition root hands in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import ClassVar, Protocol

from pydantic import Field, create_model

from bot.config.models import ModelConfig, ModelLimits, model_limits
from bot.config.platforms import ChannelPolicyConfig, ChannelSection
from bot.config.providers import (
    DEFAULT_PROVIDER,
    ProviderConfig,
    ProviderKind,
)
from bot.config.sections import (
    POSTGRES_SCHEMES,
    AdminConfig,
    AgentConfig,
    AnthropicConfig,
    ContextConfig,
    LoggingConfig,
    MediaConfig,
    MemoryConfig,
    RemindersConfig,
    SchedulerConfig,
    Section,
    ServerConfig,
    SessionConfig,
    StorageConfig,
    TranscriptionConfig,
    WorkspaceConfig,
)
from bot.config.tools import McpConfig, ToolsConfig
from bot.errors import ConfigError


class Config(Section):
    agent: AgentConfig = Field(default_factory=AgentConfig)
    anthropic: AnthropicConfig = Field(default_factory=AnthropicConfig)
    workspace: WorkspaceConfig = Field(default_factory=WorkspaceConfig)
    storage: StorageConfig = Field(default_factory=StorageConfig)
    server: ServerConfig = Field(default_factory=ServerConfig)
    admin: AdminConfig = Field(default_factory=AdminConfig)
    logging: LoggingConfig = Field(default_factory=LoggingConfig)
    session: SessionConfig = Field(default_factory=SessionConfig)
    tools: ToolsConfig = Field(default_factory=ToolsConfig)
    mcp: McpConfig = Field(default_factory=McpConfig)
    context: ContextConfig = Field(default_factory=ContextConfig)
    memory: MemoryConfig = Field(default_factory=MemoryConfig)
    scheduler: SchedulerConfig = Field(default_factory=SchedulerConfig)
    media: MediaConfig = Field(default_factory=MediaConfig)
    transcription: TranscriptionConfig = Field(default_factory=TranscriptionConfig)
    reminders: RemindersConfig = Field(default_factory=RemindersConfig)
    # Per-model settings, keyed by model id (`[models."claude-haiku-4-5"]`).
    models: dict[str, ModelConfig] = Field(default_factory=dict)
    # Further model providers (`[providers.openrouter]`); `anthropic` is built in.
    providers: dict[str, ProviderConfig] = Field(default_factory=dict)

    # Where the file was read from (None: defaults); relative paths resolve against base_dir.
    source: Path | None = Field(default=None, exclude=True)
    base_dir: Path = Field(default_factory=Path.cwd, exclude=True)

    # Each channel's section model, by name; `config_model` fills it.
    channel_sections: ClassVar[Mapping[str, type[ChannelSection]]] = {}

    def channel_settings(self) -> dict[str, ChannelSection]:
        """Each channel's section, by name."""
        return {name: getattr(self, name) for name in self.channel_sections}

    def channel(self, name: str) -> ChannelSection | None:
        """The `[name]` section of a channel; None for a channel this model has none of."""
        return self.channel_settings().get(name)

    def channel_policy(self, channel: str) -> ChannelPolicyConfig | None:
        """The access/history settings of a chat platform (None for the local channel)."""
        policy = self.channel(channel)
        return policy if isinstance(policy, ChannelPolicyConfig) else None

    @classmethod
    def pairing_channels(cls) -> list[str]:
        """The channels whose DM policy may be "pairing", where operators approve requests."""
        return [
            name
            for name, model in cls.channel_sections.items()
            if issubclass(model, ChannelPolicyConfig)
        ]

    def secrets(self) -> list[str]:
        """Every configured secret, for the logs and error messages to redact."""
        found = [self.anthropic.api_key, self.admin.console_token, self.tools.web_search.api_key]
        found += [provider.api_key for provider in self.providers.values()]
        for section in self.channel_settings().values():
            found += section.secrets()
        return found

    def adjustments(self) -> list[str]:
        """Settings Krill does not use as written, one line each saying what it uses
        instead and why (logged at start-up, shown by `krill doctor`)."""
        context = self.context
        if context.reserve_tokens >= context.reserve_tokens_floor:
            return []
        return [
            f"context.reserve_tokens = {context.reserve_tokens:,} is below "
            f"context.reserve_tokens_floor ({context.reserve_tokens_floor:,}); using "
            f"{context.reserve:,}, so a reply, a tool result or a summary request still fits "
            "before the window is full"
        ]

    def provider(self, name: str) -> ProviderConfig:
        """The settings of provider `name`; the built-in `anthropic` is the [anthropic]
        section. Raises KeyError for a provider that is not configured."""
        if name == DEFAULT_PROVIDER:
            cfg = self.anthropic
            return ProviderConfig(
                kind=ProviderKind.ANTHROPIC,
                base_url=cfg.base_url,
                api_key=cfg.api_key,
                timeout=cfg.timeout,
                max_retries=cfg.max_retries,
            )
        return self.providers[name]

    def provider_names(self) -> list[str]:
        return [DEFAULT_PROVIDER, *sorted(self.providers)]

    def listed_models(self) -> list[str]:
        """Every model id the config names for requests, in order, once each."""
        agent = self.agent
        return list(dict.fromkeys([agent.model, *agent.models, *agent.fallback_models]))

    def model_settings(self, model: str) -> ModelConfig:
        return self.models.get(model, ModelConfig())

    def model_limits(self, model: str) -> ModelLimits:
        """The window and output limit of `model` (an id as requests name it)."""
        return model_limits(self.models, model, ceiling=self.agent.context_window)

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
    def media_dir(self) -> Path:
        """Where received media is kept, content-addressed: beside the SQLite database, or
        in data/media for PostgreSQL (a folder every replica must share)."""
        if self.uses_postgres:
            return self.resolve("data/media")
        return self.sqlite_path.parent / "media"

    @property
    def uses_postgres(self) -> bool:
        return self.storage.url.startswith(POSTGRES_SCHEMES)

    @property
    def sqlite_path(self) -> Path:
        url = self.storage.url
        if not url.startswith("sqlite:///"):
            raise ConfigError(
                f"storage.url: only sqlite:/// and postgresql:// URLs are supported, got {url!r}"
            )
        rest = url[len("sqlite:///") :]
        return Path(rest) if rest.startswith("/") else self.resolve(rest)


class ChannelEntry(Protocol):
    """What the config needs of a channel's registry entry (`ChannelSpec`)."""

    @property
    def name(self) -> str: ...

    @property
    def config(self) -> type[ChannelSection]: ...


def config_model(channels: Iterable[ChannelEntry]) -> type[Config]:
    """The root model with a `[<name>]` section for each of `channels` beside the core ones."""
    return _config_model(tuple((channel.name, channel.config) for channel in channels))


@cache
def _config_model(sections: tuple[tuple[str, type[ChannelSection]], ...]) -> type[Config]:
    clash = [name for name, _ in sections if name in Config.model_fields]
    if clash:
        raise ValueError(f"channel names clash with config sections: {', '.join(clash)}")
    fields = {name: (model, Field(default_factory=model)) for name, model in sections}
    model = create_model("Config", __base__=Config, **fields)  # type: ignore[call-overload]
    model.channel_sections = dict(sections)
    return model
