"""Skills: procedures an operator writes in the workspace (`skills/<name>/SKILL.md`) that the
model reads when a task calls for one, and the `skill_read` tool that reads them."""
