"""`krill init [DIR]`: a starter krill.toml and a copy of the bundled workspace template in a
folder, with the owner's chat identity as its first admin, so their first DM is answered.

The owner comes from `--owner telegram:<id>` / `--owner slack:<member id>` (repeatable) or,
on a terminal, from a question; a new config lets strangers ask for access with a pairing
code (`dm_policy = "pairing"`), which tells them their id and the operator what to run.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from bot.agent.workspace import ensure_workspace, is_template
from bot.errors import EXIT_FIXABLE

# Owner ids as the platforms show them: Telegram's numeric user id, Slack's member id.
OWNER_FORMS = {
    "telegram": re.compile(r"\d{1,20}"),
    "slack": re.compile(r"[UW][A-Z0-9]{2,20}"),
}
OWNER_HELP = "telegram:<numeric user id> or slack:<member id such as U0123ABC>"
OWNER_QUESTION = (
    "Who owns this bot? Your chat identity becomes its first admin, so your DMs are answered.\n"
    f"Give it as {OWNER_HELP}; several separated by spaces.\n"
    "Not sure? Press Enter: then DM the bot once it runs, and its reply tells you your id and\n"
    "a pairing code to approve with `krill pairing approve`.\n"
    "owner> "
)

STARTER_CONFIG = """\
# Krill configuration. Every key is optional; Krill's docs/configuration.md lists them all.
[agent]
model = "claude-sonnet-4-6"
timezone = "UTC"   # reminders, daily notes and [session.reset] at read times here
# models = ["claude-sonnet-4-6", "claude-haiku-4-5"]   # what /model may switch a session to

# [session.reset]   # start fresh sessions on their own (the old one is flushed and summarized)
# mode = "idle"     # off | idle | daily
# idle_after = "24h"

[anthropic]
# The API key comes from ANTHROPIC_API_KEY.
cache_ttl = "5m"

[workspace]
path = "workspace"

[storage]
url = "sqlite:///data/krill.db"
# url = "postgresql://krill:secret@db.internal:5432/krill"   # several replicas share one PostgreSQL

[server]
host = "127.0.0.1"
port = 8787

[admin]
# Admins: answered everywhere, may run every command. e.g. ["telegram:12345", "slack:U0AB"]
users = {owners}

[telegram]
enabled = false   # token from TELEGRAM_BOT_TOKEN
# Anyone else who DMs the bot gets their id and a pairing code: krill pairing approve telegram CODE
dm_policy = "pairing"

[slack]
enabled = false   # tokens from SLACK_BOT_TOKEN, SLACK_APP_TOKEN, SLACK_SIGNING_SECRET
dm_policy = "pairing"
"""


class BadOwner(ValueError):
    """An owner that is not `telegram:<id>` or `slack:<member id>`; the message says why."""


def owner_entry(text: str) -> str:
    """`text` as an admin.users entry (`<channel>:<id>`, Slack ids upper-cased)."""
    channel, _, user = text.strip().partition(":")
    channel = channel.lower()
    form = OWNER_FORMS.get(channel)
    user = user.strip().upper() if channel == "slack" else user.strip()
    if form is None or not form.fullmatch(user):
        raise BadOwner(f"{text.strip()!r} is not an owner; give {OWNER_HELP}")
    return f"{channel}:{user}"


def init_command(args: argparse.Namespace) -> int:
    target = Path(args.dir or ".").resolve()
    if target.exists() and not target.is_dir():
        print(f"krill init: {target} is a file; give a folder (new or existing)", file=sys.stderr)
        return EXIT_FIXABLE
    if is_template(target / "workspace"):
        print(
            f"krill init: {target} is Krill's source checkout, whose workspace/ is the bundled "
            "template; run krill init in another folder (or `krill run` here without a "
            "krill.toml, which keeps its workspace in data/workspace)",
            file=sys.stderr,
        )
        return EXIT_FIXABLE
    try:
        owners = [owner_entry(o) for o in args.owner]
    except BadOwner as exc:
        print(f"krill init: --owner: {exc}", file=sys.stderr)
        return EXIT_FIXABLE
    try:
        _init(target, owners, force=args.force)
    except OSError as exc:
        where = exc.filename or target
        print(
            f"krill init: cannot write {where} ({exc.strerror or exc}); choose a folder you "
            "can write to, or fix its permissions",
            file=sys.stderr,
        )
        return EXIT_FIXABLE
    return 0


def _init(target: Path, owners: list[str], *, force: bool) -> None:
    target.mkdir(parents=True, exist_ok=True)
    config_path = target / "krill.toml"
    if config_path.exists() and not force:
        print(f"{config_path} already exists (use --force to overwrite)")
        if owners:
            print(f"  it was left as it is: add {json.dumps(owners)} to admin.users there")
    else:
        if not owners and sys.stdin.isatty():
            owners = _ask_owners()
        # Owner entries are checked above, so a JSON list of them is a TOML array too.
        config_path.write_text(STARTER_CONFIG.format(owners=json.dumps(owners)), "utf-8")
        print(f"wrote {config_path}" + (f" (admins: {', '.join(owners)})" if owners else ""))
    workspace = target / "workspace"
    if ensure_workspace(workspace):
        print(f"copied the bundled workspace template to {workspace}")
    else:
        print(f"{workspace} already exists; left as it is")
    print(f"next: export ANTHROPIC_API_KEY=... && krill run --config {config_path}")


def _ask_owners() -> list[str]:
    while True:
        try:
            answer = input(OWNER_QUESTION)
        except EOFError:
            print()
            return []
        try:
            return [owner_entry(word) for word in answer.split()]
        except BadOwner as exc:
            print(exc)
