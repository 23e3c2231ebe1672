"""Shared fixtures: the loopback fakes of the Anthropic, Telegram and Slack servers."""

pytest_plugins = [
    "tests.fakes.anthropic",
    "tests.fakes.telegram",
    "tests.fakes.slack",
]
