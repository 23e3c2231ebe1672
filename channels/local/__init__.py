"""The local channel: a terminal chat (`krill chat`) and a small web chat served at `/`."""

from channels.local.terminal import TerminalChannel
from channels.local.web import WebChannel

__all__ = ["TerminalChannel", "WebChannel"]
