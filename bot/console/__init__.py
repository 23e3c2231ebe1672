"""The operator console at /admin (docs/contracts.md section 12): sessions and their costs,
transcripts, the workspace's markdown, memory, pairings and health, as server-rendered pages
on the service's own aiohttp server. Off unless `admin.console_token` is set."""
