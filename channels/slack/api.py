"""What the Slack adapter's parts share about the Web API: the size of their in-memory
caches and what Slack's error codes mean."""

from __future__ import annotations

from slack_sdk.errors import SlackApiError

MEMORY_ITEMS = 10_000  # bound of each in-memory cache (seen events, threads, names, ...)

# Errors meaning "this workspace/app cannot take `markdown_text`": fall back to mrkdwn text.
MARKDOWN_REJECTED = frozenset(
    {"no_text", "invalid_arguments", "invalid_blocks", "markdown_text_conflict"}
)
# Errors meaning a feature (native streaming, thread status) is off for this app everywhere.
FEATURE_UNAVAILABLE = frozenset(
    {
        "unknown_method",
        "missing_scope",
        "not_allowed_token_type",
        "no_permission",
        "feature_not_enabled",
        "method_not_supported_for_channel_type",
    }
)
FATAL_BOT_TOKEN_ERRORS = frozenset({"invalid_auth", "not_authed", "token_revoked"})


def api_error(exc: SlackApiError) -> str:
    """The `error` code of a failed Web API call ("" when Slack sent none)."""
    return str(exc.response.get("error", "")) if exc.response is not None else ""
