"""Long-term memory: MEMORY.md and the daily notes in memory/, an FTS5 index over them, the
memory tools, per-turn recall, and the silent flush turn that writes durable facts down.

`bot.memory.extension` wires it into a running App; nothing in the core imports this package.
"""
