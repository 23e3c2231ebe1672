"""Shared fixtures: the loopback fakes of the Anthropic, Telegram, Slack and embeddings
servers, and the throwaway PostgreSQL server."""

pytest_plugins = [
    "tests.fakes.anthropic",
    "tests.fakes.telegram",
    "tests.fakes.slack",
    "tests.fakes.embeddings",
    "tests.postgres",
]
