"""deploy/slack-manifest.yaml creates an app Krill can work with: every Web API method the
Slack adapter calls has a scope in it, every event the adapter handles is subscribed, the
slash command, DMs and interactivity (button presses) are on, and it is set for Socket Mode
with the HTTP changes named."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from channels.slack.transport import EVENTS_PATH, INTERACTIVITY_PATH

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = ROOT / "deploy" / "slack-manifest.yaml"
ADAPTER = ROOT / "channels" / "slack"

# The bot scope each Web API method needs (any one of a set), per Slack's method docs.
HISTORY = {"channels:history", "groups:history", "im:history", "mpim:history"}
METHOD_SCOPES: dict[str, set[str]] = {
    "chat_postMessage": {"chat:write"},
    "chat_update": {"chat:write"},
    "chat_postEphemeral": {"chat:write"},
    "chat_startStream": {"chat:write"},
    "chat_appendStream": {"chat:write"},
    "chat_stopStream": {"chat:write"},
    "assistant_threads_setStatus": {"chat:write", "assistant:write"},
    "conversations_history": HISTORY,
    "conversations_replies": HISTORY,
    "reactions_add": {"reactions:write"},
    "reactions_remove": {"reactions:write"},
    "users_info": {"users:read"},
    # Asked only for channels, private channels and group DMs: each kind needs its own.
    "conversations_info": {"channels:read", "groups:read", "mpim:read"},
    "files_upload_v2": {"files:write"},
    "auth_test": set(),
}
# Attributes of the Socket Mode client, not Web API methods.
NOT_METHODS = {
    "connect_operation_lock",
    "default_auto_reconnect_enabled",
    "is_connected",
    "issue_new_wss_url",
    "last_ping_pong_time",
    "wss_uri",
}
# The events the adapter registers, and the bot events that deliver them.
EVENT_SUBSCRIPTIONS = {
    "app_mention": {"app_mention"},
    "message": {"message.channels", "message.groups", "message.im", "message.mpim"},
}


def manifest() -> dict[str, Any]:
    return dict(yaml.safe_load(MANIFEST.read_text()))


def adapter_source() -> str:
    return "\n".join(p.read_text() for p in sorted(ADAPTER.glob("*.py")))


def test_every_method_the_adapter_calls_has_its_scope() -> None:
    scopes = set(manifest()["oauth_config"]["scopes"]["bot"])
    called = set(re.findall(r"client\.([a-z]+_[A-Za-z0-9_]+)", adapter_source())) - NOT_METHODS
    unknown = called - set(METHOD_SCOPES)
    assert not unknown, f"add the scopes of {unknown} to the manifest and to METHOD_SCOPES"
    for method in called:
        needed = METHOD_SCOPES[method]
        assert not needed or needed & scopes, f"{method} needs one of {needed}"
    assert HISTORY <= scopes  # every kind of conversation is read
    assert METHOD_SCOPES["conversations_info"] <= scopes  # every kind of channel is named
    # Received files are downloaded with the bot token, and /krill needs its scope.
    assert "url_private_download" in adapter_source() and "files:read" in scopes
    assert "commands" in scopes


def test_every_event_the_adapter_handles_is_subscribed() -> None:
    events = set(manifest()["settings"]["event_subscriptions"]["bot_events"])
    registered = set(re.findall(r'self\.app\.event\("([a-z_]+)"\)', adapter_source()))
    assert registered == set(EVENT_SUBSCRIPTIONS)
    for event in registered:
        assert EVENT_SUBSCRIPTIONS[event] <= events, event
    scopes = set(manifest()["oauth_config"]["scopes"]["bot"])
    assert "app_mentions:read" in scopes


def test_dms_the_slash_command_and_socket_mode() -> None:
    doc = manifest()
    features, settings = doc["features"], doc["settings"]
    assert features["app_home"]["messages_tab_enabled"] is True
    assert features["app_home"]["messages_tab_read_only_enabled"] is False
    assert [c["command"] for c in features["slash_commands"]] == ["/krill"]
    assert settings["socket_mode_enabled"] is True
    # The HTTP variant is spelled out: the keys to change, and Krill's paths.
    text = MANIFEST.read_text()
    for change in (
        "settings.socket_mode_enabled: false",
        f"settings.event_subscriptions.request_url: https://your-host{EVENTS_PATH}",
        f"features.slash_commands[0].url: https://your-host{EVENTS_PATH}",
        f"settings.interactivity.request_url: https://your-host{INTERACTIVITY_PATH}",
    ):
        assert change in text
    assert "connections:write" in text  # the app-level token Socket Mode needs


def test_interactivity_is_on_for_the_press_handler() -> None:
    # The adapter answers presses of its buttons; Slack sends them only with this on.
    assert re.search(r"self\.app\.action\(", adapter_source())
    interactivity = manifest()["settings"]["interactivity"]
    assert interactivity["is_enabled"] is True
    assert "request_url" not in interactivity  # Socket Mode delivers presses itself
