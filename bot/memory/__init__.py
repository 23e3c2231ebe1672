"""Long-term memory: MEMORY.md and the daily notes in memory/, an FTS5 index over them, the
memory tools, per-turn recall, and the silent flush turn that writes durable facts down.

`bot.app` builds its parts and hands them to the runner, compaction and the scheduler as
protocols; nothing in the agent, context or gateway imports this package.
"""
