"""Typed configuration (docs/contracts.md section 3): the section models, the root model and
loading.

Every default lives beside its key in the section modules; the rest of Krill imports the
names below from `bot.config`.
"""

from bot.config.budgets import BudgetsConfig
from bot.config.loading import env_overrides, load_config
from bot.config.models import ModelConfig, ModelLimits, WindowSource
from bot.config.platforms import (
    ChannelPolicyConfig,
    ChannelSection,
    DmPolicy,
    GroupOverride,
    GroupPolicy,
    PeerOverride,
    ToolFilterConfig,
)
from bot.config.providers import (
    DEFAULT_PROVIDER,
    ModelRef,
    ProviderConfig,
    ProviderKind,
    split_model_id,
)
from bot.config.root import ChannelEntry, Config, config_model
from bot.config.sections import (
    MAX_PIXELS_CEILING,
    AdminConfig,
    ContextConfig,
    LoggingConfig,
    MediaConfig,
    MemoryConfig,
    MemoryEmbeddingsConfig,
    MemorySearchConfig,
    Section,
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
    "DEFAULT_PROVIDER",
    "MAX_PIXELS_CEILING",
    "AdminConfig",
    "BudgetsConfig",
    "ChannelEntry",
    "ChannelPolicyConfig",
    "ChannelSection",
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
    "ModelRef",
    "PeerOverride",
    "ProviderConfig",
    "ProviderKind",
    "Section",
    "SessionConfig",
    "SessionResetConfig",
    "ToolFilterConfig",
    "ToolResultsConfig",
    "TranscriptionConfig",
    "WebFetchConfig",
    "WebSearchConfig",
    "WindowSource",
    "config_model",
    "env_overrides",
    "load_config",
    "split_model_id",
]
