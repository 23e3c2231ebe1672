"""Specific exceptions, caught where a user-facing message is built."""

from __future__ import annotations

# The exit status of every CLI failure a person can fix (config, a folder, a port).
EXIT_FIXABLE = 2


class KrillError(Exception):
    """Base class for errors Krill raises on purpose."""


class ConfigError(KrillError):
    """The configuration is wrong; the message names the key and the file."""


class StartupError(KrillError):
    """Krill cannot start for a reason a person can fix (a folder, a port, an unreachable
    service); the message names the config key or path and what to do."""


class PreviewSkipped(KrillError):
    """A channel left out a streaming preview to stay under the platform's rate limits;
    the next preview or the final reply shows the text instead."""


class StoreUnavailable(KrillError):
    """The store stayed locked or unreachable for longer than a write may wait; what was
    being written is still unanswered work that the next start picks up."""

    user_message = (
        "Sorry, I couldn't save your message's answer just now because my storage is busy. "
        "I'll answer it as soon as I can."
    )


class ModelError(KrillError):
    """The model call failed after its retries."""

    user_message = "Sorry, I couldn't reach the model just now. Please try again in a moment."
    # True when the reply stream broke after it had begun: retries cover only failures
    # before the first byte, so one more attempt by the caller may still succeed.
    retryable = False
    # True for failures another model may not share (overload, a long rate limit, a server
    # error, an unreachable provider): agent.fallback_models are tried. A request's own
    # fault (400, a refusal) or a bad key is not one.
    falls_back = False
    # What the provider's answer said, when there was one: its HTTP status, how long it
    # asked to wait (retry-after), and its x-should-retry header.
    status: int | None = None
    retry_after: float | None = None
    should_retry: bool | None = None
    model: str = ""  # the model id (as the config names it) that failed


class ModelNotConfigured(ModelError):
    user_message = (
        "I'm running, but no model API key is set. The operator should set ANTHROPIC_API_KEY "
        "(or anthropic.api_key in krill.toml) and restart Krill."
    )


class ModelAuthError(ModelError):
    user_message = (
        "The model provider rejected Krill's API key. The operator should check ANTHROPIC_API_KEY."
    )


class ModelRateLimited(ModelError):
    user_message = "The model is rate-limiting us right now. Please try again in a minute."
    falls_back = True


class ModelUnavailable(ModelError):
    """A server error (5xx) or no connection at all, after the retries."""

    falls_back = True


class ModelStreamInterrupted(ModelError):
    """The connection broke (or the API sent an error event) in the middle of a reply."""

    user_message = (
        "The connection to the model broke off before the reply was complete. "
        "Please send your message again."
    )
    retryable = True
    falls_back = True


class ModelOverloaded(ModelError):
    user_message = "The model is overloaded right now. Please try again in a minute."
    falls_back = True


class ContextOverflow(ModelError):
    """The provider said the prompt is too long."""

    user_message = (
        "This conversation has grown too long for the model, even after compacting it. "
        "Send /reset to start a fresh session (your memory notes are kept)."
    )

    def __init__(self, message: str, tokens: int | None = None, limit: int | None = None):
        super().__init__(message)
        self.tokens = tokens
        self.limit = limit
