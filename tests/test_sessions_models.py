"""bot.sessions.models: the model a session's requests use, and when its choice is dropped."""

from __future__ import annotations

from bot.config import Config
from bot.config.sections import AgentConfig
from bot.sessions.models import SessionModel, allowed_models, session_model

SONNET, HAIKU, OPUS = "claude-sonnet-4-6", "claude-haiku-4-5", "claude-opus-4-1"


def config(models: list[str]) -> Config:
    return Config(agent=AgentConfig(model=SONNET, models=models))


def test_a_choice_holds_while_agent_models_offers_it() -> None:
    offered = config([SONNET, HAIKU])
    assert allowed_models(offered) == [SONNET, HAIKU]
    assert session_model(offered, "") == SessionModel(SONNET)
    assert session_model(offered, HAIKU) == SessionModel(HAIKU)
    assert session_model(offered, SONNET) == SessionModel(SONNET)


def test_a_choice_no_longer_offered_falls_back_to_agent_model() -> None:
    assert session_model(config([SONNET]), HAIKU) == SessionModel(SONNET, dropped=HAIKU)
    assert allowed_models(config([])) == [SONNET]
    assert session_model(config([]), OPUS) == SessionModel(SONNET, dropped=OPUS)
    # agent.model is every session's default, whether or not agent.models lists it.
    assert session_model(config([HAIKU]), SONNET) == SessionModel(SONNET)
