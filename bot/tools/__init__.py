"""Tools beyond memory: web_fetch, large results kept on disk, MCP servers, and tool policy.

`bot.tools.extension` wires them into a running App; the other modules import nothing heavy
at package import, so the core can use `bot.tools.policy` cheaply.
"""
