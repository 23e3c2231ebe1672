"""The whole configuration: one typed model with a field per TOML section, and the paths
and timings derived from it.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from bot.config.models import ModelConfig, ModelLimits, model_limits
from bot.config.platforms import ChannelPolicyConfig, SlackConfig, TelegramConfig
from bot.config.sections import (
    POSTGRES_SCHEMES,
    AdminConfig,
    AgentConfig,
    AnthropicConfig,
    ContextConfig,
    LocalConfig,
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
    telegram: TelegramConfig = Field(default_factory=TelegramConfig)
    slack: SlackConfig = Field(default_factory=SlackConfig)
    local: LocalConfig = Field(default_factory=LocalConfig)
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

    # Where the file was read from (None: defaults); relative paths resolve against base_dir.
    source: Path | None = Field(default=None, exclude=True)
    base_dir: Path = Field(default_factory=Path.cwd, exclude=True)

    def channel_policy(self, channel: str) -> ChannelPolicyConfig | None:
        """The access/history settings of a chat platform (None for the local channel)."""
        policy = getattr(self, channel, None)
        return policy if isinstance(policy, ChannelPolicyConfig) else None

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
