"""A session's limits as every step works with them: its model (the `/model` choice, as
`bot.sessions.models` resolves it), that model's window and output limit, and the smaller
window the provider named for that model in a "prompt is too long" error.

Derived from the session's row each time, so switching the model recomputes the window, and
a window learned on one model never shrinks another's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from bot.config import Config, WindowSource
from bot.sessions.models import session_model


class WindowFacts(Protocol):
    """What a session row records about its model and window (`SessionRow` has these)."""

    chosen_model: str
    context_window: int | None  # the window the provider named in an overflow
    context_window_model: str  # the model it named it for ("": any)


@dataclass(frozen=True, slots=True)
class SessionLimits:
    model: str  # what the session's requests use
    window: int  # the most its requests may carry, in tokens
    source: WindowSource  # where `window` comes from
    max_output_tokens: int | None  # the model's output limit, when known


def session_limits(config: Config, session: WindowFacts, model: str | None = None) -> SessionLimits:
    """The session's limits, or those of `model` when another model serves its request (a
    fallback model standing in while the session's own is unavailable)."""
    model = model or session_model(config, session.chosen_model).model
    limits = config.model_limits(model)
    learned = session.context_window
    applies = session.context_window_model in ("", model)
    if learned is not None and applies and learned < limits.context_window:
        return SessionLimits(model, learned, WindowSource.LEARNED, limits.max_output_tokens)
    return SessionLimits(
        model, limits.context_window, limits.window_source, limits.max_output_tokens
    )
