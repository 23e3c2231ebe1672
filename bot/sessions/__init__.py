"""Routing decisions made before a message reaches a session: keys, access and history limits."""
