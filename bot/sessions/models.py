"""Which model a session's requests use, as a pure function of the config and its /model choice.

A choice stays in force while `agent.models` still offers it. Once the operator takes it
out, the session falls back to `agent.model`: the model may be gone, retired or no longer
paid for, and nobody chose to keep it. Every caller that sends a session's request (turns,
flushes, summaries) and every place that names the session's model (`/status`, `/model`)
resolves it here, so they agree.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.config import Config


@dataclass(frozen=True, slots=True)
class SessionModel:
    model: str  # what the session's requests use
    dropped: str = ""  # the session's choice that agent.models no longer offers, if any


def allowed_models(config: Config) -> list[str]:
    """The ids /model offers: agent.models, or only agent.model when that is empty."""
    return list(config.agent.models) or [config.agent.model]


def session_model(config: Config, chosen: str) -> SessionModel:
    """The model of a session whose /model choice is `chosen` ("" for none)."""
    agent = config.agent
    if not chosen or chosen == agent.model:
        return SessionModel(agent.model)
    if chosen in allowed_models(config):
        return SessionModel(chosen)
    return SessionModel(agent.model, dropped=chosen)
