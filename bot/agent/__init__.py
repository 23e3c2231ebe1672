"""The agent core: the one model⇄tools loop, turns over a session's transcript, model calls
and their accounting, reply delivery, the workspace and system prompt, silent replies."""
