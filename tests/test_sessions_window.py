"""bot.sessions.window: a session's model, window and where the window comes from."""

from __future__ import annotations

from bot.config import Config, ModelConfig, WindowSource
from bot.config.sections import AgentConfig
from bot.sessions.window import session_limits
from bot.store.base import SessionRow

SONNET, HAIKU = "claude-sonnet-4-6", "claude-haiku-4-5"


def config() -> Config:
    return Config(
        agent=AgentConfig(model=SONNET, models=[SONNET, HAIKU], context_window=200_000),
        models={HAIKU: ModelConfig(context_window=120_000)},
    )


def session(**fields: object) -> SessionRow:
    return SessionRow("s1", "agent:main:main", True, 0.0, 0.0, **fields)  # type: ignore[arg-type]


def test_switching_the_model_recomputes_the_window() -> None:
    cfg = config()
    on_sonnet = session_limits(cfg, session())
    assert (on_sonnet.model, on_sonnet.window, on_sonnet.source) == (
        SONNET,
        200_000,
        WindowSource.CONFIG,
    )
    on_haiku = session_limits(cfg, session(chosen_model=HAIKU))
    assert (on_haiku.model, on_haiku.window, on_haiku.source) == (
        HAIKU,
        120_000,
        WindowSource.MODEL,
    )


def test_a_learned_window_holds_for_the_model_it_was_learned_on_only() -> None:
    cfg = config()
    learned = {"context_window": 90_000, "context_window_model": SONNET}
    assert session_limits(cfg, session(**learned)).window == 90_000
    assert session_limits(cfg, session(**learned)).source == WindowSource.LEARNED
    # Switched to Haiku: Sonnet's refusal says nothing about Haiku's window.
    assert session_limits(cfg, session(chosen_model=HAIKU, **learned)).window == 120_000
    # A learned window is only ever smaller than the model's own.
    bigger = {"context_window": 150_000, "context_window_model": HAIKU, "chosen_model": HAIKU}
    assert session_limits(cfg, session(**bigger)).window == 120_000
    # Rows from before the model was recorded: the learned window holds for any model.
    assert session_limits(cfg, session(context_window=50_000)).window == 50_000
