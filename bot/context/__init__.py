"""Context management: what each model request carries. Messages rendered from the typed
transcript, tool results capped and pruned, tool_use/result pairs repaired, compaction
(`bot.context.compaction`) and overflow recovery, all over the anthropic SDK's typed params.
`pipeline.ContextPipeline` is what the runner receives; `host` names what it needs."""
