"""Shared fixtures: the loopback fakes of the Anthropic, Telegram, Slack and embeddings
servers."""

pytest_plugins = [
    "tests.fakes.anthropic",
    "tests.fakes.telegram",
    "tests.fakes.slack",
    "tests.fakes.embeddings",
]
