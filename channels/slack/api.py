"""What the Slack adapter's parts share about the Web API: the size of their in-memory
caches, the timeouts of its calls, and what Slack's error codes and a call that timed out
mean."""

from __future__ import annotations

import aiohttp
from slack_sdk.errors import SlackApiError

from bot.channel_contract import SendFailure, SendFailureKind
from channels.timeouts import PlatformTimeouts

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


def client_timeout(timeouts: PlatformTimeouts) -> aiohttp.ClientTimeout:
    """`[slack.timeouts]` for the aiohttp session every Web API call goes through. aiohttp
    has no write timeout of its own: a whole call may take the sum of the four steps."""
    return aiohttp.ClientTimeout(
        total=timeouts.pool + timeouts.connect + timeouts.write + timeouts.read,
        connect=timeouts.pool + timeouts.connect,  # aiohttp counts the pool wait in it
        sock_connect=timeouts.connect,
        sock_read=timeouts.read,
    )


def network_failure(exc: BaseException) -> SendFailure:
    """What a send that failed below the Web API means for the outbox: a timeout once the
    request could be on its way may have been carried out (an unknown outcome, looked up
    before it is sent again); a failure to connect, or the network, is transient."""
    if isinstance(exc, TimeoutError) and not isinstance(exc, aiohttp.ConnectionTimeoutError):
        return SendFailure(SendFailureKind.UNKNOWN, "Slack did not answer in time")
    return SendFailure(SendFailureKind.TRANSIENT, f"cannot reach Slack: {exc}")


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
