"""Tools: the registry and tool contract, tool policy, web_fetch, large results kept on disk,
and MCP servers (the memory tools live in `bot.memory`).

`bot.app` builds them into the registry; the modules import nothing heavy at package
import, so the core can use `bot.tools.policy` cheaply.
"""
