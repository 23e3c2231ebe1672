"""Typed configuration (DESIGN.md section 3): the section models, the root model, and loading.

Every default lives beside its key in the section modules; the rest of Krill imports the
names below from `bot.config`.
"""

from bot.config.loading import env_overrides, load_config
from bot.config.models import ModelConfig, ModelLimits, WindowSource
from bot.config.platforms import (
    ChannelPolicyConfig,
    DmPolicy,
    GroupOverride,
    GroupPolicy,
    PeerOverride,
    PlatformTimeouts,
    SlackConfig,
    SlackPacing,
    TelegramConfig,
    TelegramPacing,
    ToolFilterConfig,
)
from bot.config.root import Config
from bot.config.sections import (
    MAX_PIXELS_CEILING,
    AdminConfig,
    ContextConfig,
    LoggingConfig,
    MediaConfig,
    MemoryConfig,
    MemoryEmbeddingsConfig,
    MemorySearchConfig,
    SessionConfig,
    SessionResetConfig,
    TranscriptionConfig,
)
from bot.config.tools import (
    McpConfig,
    McpServerConfig,
    ToolResultsConfig,
    WebFetchConfig,
    WebSearchConfig,
)

__all__ = [
    "MAX_PIXELS_CEILING",
    "AdminConfig",
    "ChannelPolicyConfig",
    "Config",
    "ContextConfig",
    "DmPolicy",
    "GroupOverride",
    "GroupPolicy",
    "LoggingConfig",
    "McpConfig",
    "McpServerConfig",
    "MediaConfig",
    "MemoryConfig",
    "MemoryEmbeddingsConfig",
    "MemorySearchConfig",
    "ModelConfig",
    "ModelLimits",
    "PeerOverride",
    "PlatformTimeouts",
    "SessionConfig",
    "SessionResetConfig",
    "SlackConfig",
    "SlackPacing",
    "TelegramConfig",
    "TelegramPacing",
    "ToolFilterConfig",
    "ToolResultsConfig",
    "TranscriptionConfig",
    "WebFetchConfig",
    "WebSearchConfig",
    "WindowSource",
    "env_overrides",
    "load_config",
]
