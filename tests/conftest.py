"""Shared fixtures: the loopback fakes of the Anthropic, OpenAI-compatible, Telegram, Slack,
embeddings and web search servers, and the throwaway PostgreSQL server."""

pytest_plugins = [
    "tests.fakes.anthropic",
    "tests.fakes.openai",
    "tests.fakes.telegram",
    "tests.fakes.slack",
    "tests.fakes.embeddings",
    "tests.fakes.search",
    "tests.postgres",
]
