"""Typed configuration (DESIGN.md section 3): the section models, the root model, and loading.

Every default lives beside its key in the section modules; the rest of Krill imports the
names below from `bot.config`.
"""

from bot.config.loading import env_overrides, load_config
from bot.config.platforms import (
    ChannelPolicyConfig,
    DmPolicy,
    GroupOverride,
    GroupPolicy,
    PeerOverride,
    SlackConfig,
    TelegramConfig,
    ToolFilterConfig,
)
from bot.config.root import Config
from bot.config.sections import (
    AdminConfig,
    ContextConfig,
    LoggingConfig,
    MemoryConfig,
    MemoryEmbeddingsConfig,
    MemorySearchConfig,
    SessionConfig,
)
from bot.config.tools import McpConfig, McpServerConfig, ToolResultsConfig, WebFetchConfig

__all__ = [
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
    "MemoryConfig",
    "MemoryEmbeddingsConfig",
    "MemorySearchConfig",
    "PeerOverride",
    "SessionConfig",
    "SlackConfig",
    "TelegramConfig",
    "ToolFilterConfig",
    "ToolResultsConfig",
    "WebFetchConfig",
    "env_overrides",
    "load_config",
]
