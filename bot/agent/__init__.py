"""The agent core: system prompt and workspace, untrusted-content wrapping, silent replies."""
