"""All timed work. `service.Scheduler` is what the app starts (only in `krill run`); `jobs`
is the timer under it, `idle` the flush and compaction of quiet sessions, `heartbeat` the
periodic checklist turn, `retention` the daily pruning of old rows."""
