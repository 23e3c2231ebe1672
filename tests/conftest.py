"""Shared fixtures: the loopback fakes of the Anthropic, Telegram, Slack, embeddings and web
search servers, and the throwaway PostgreSQL server."""

pytest_plugins = [
    "tests.fakes.anthropic",
    "tests.fakes.telegram",
    "tests.fakes.slack",
    "tests.fakes.embeddings",
    "tests.fakes.search",
    "tests.postgres",
]
