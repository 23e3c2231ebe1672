"""What the Slack adapter's parts share about the Web API: the size of their in-memory
caches and what Slack's error codes mean."""

from __future__ import annotations

from slack_sdk.errors import SlackApiError

from bot.channel_contract import SendFailure, SendFailureKind

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
# Errors on Slack's side that a later try may not meet; any other error refuses for good.
TRANSIENT_ERRORS = frozenset(
    {"internal_error", "fatal_error", "service_unavailable", "request_timeout"}
)
RATE_LIMITED = "ratelimited"


def api_error(exc: SlackApiError) -> str:
    """The `error` code of a failed Web API call ("" when Slack sent none)."""
    return str(exc.response.get("error", "")) if exc.response is not None else ""


def _retry_after(exc: SlackApiError) -> float:
    headers = exc.response.headers if exc.response is not None else {}
    for name, value in (headers or {}).items():
        if name.lower() == "retry-after":
            raw = value[0] if isinstance(value, list) else value
            try:
                return max(0.0, float(raw))
            except ValueError:
                break
    return 1.0  # Slack always names a delay; one second if it did not


def send_failure(exc: SlackApiError) -> SendFailure:
    """What a refused post or edit means for the outbox."""
    error = api_error(exc)
    status = exc.response.status_code if exc.response is not None else 0
    if status == 429 or error == RATE_LIMITED:
        return SendFailure(SendFailureKind.RETRY_AFTER, "Slack rate limit", _retry_after(exc))
    if error == "msg_too_long":
        return SendFailure(SendFailureKind.TOO_LONG, error)
    if status >= 500 or error in TRANSIENT_ERRORS:
        return SendFailure(SendFailureKind.TRANSIENT, error or f"HTTP {status}")
    return SendFailure(SendFailureKind.PERMANENT, error or f"HTTP {status}")
