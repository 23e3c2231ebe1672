"""Krill: a self-hosted chat-bot service for Telegram, Slack and a local channel."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("krill")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0"
