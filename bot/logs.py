"""Logging set-up: text or JSON lines, the turn's id and session key on each line, message
bodies only when the operator asks, a redaction filter so tokens and keys never reach a log
line, and a redacting pipe for what child processes write to stderr."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import os
import re
import sys
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import TracebackType
from typing import TextIO

from bot.config import LoggingConfig
from bot.errors import ConfigError
from bot.log_context import Content, TurnContextFilter
from bot.log_tail import RECENT

# Shapes of secrets Krill handles: Anthropic keys, Slack tokens, Telegram bot tokens,
# bearer headers, and secret-looking key=value pairs.
SECRET_PATTERNS = [
    re.compile(r"sk-ant-[A-Za-z0-9_\-]{8,}"),
    re.compile(r"xox[abposr]-[A-Za-z0-9\-]{6,}"),
    re.compile(r"xapp-[A-Za-z0-9\-]{6,}"),
    re.compile(r"\b\d{6,12}:[A-Za-z0-9_\-]{20,}\b"),
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._\-]{8,}"),
    re.compile(r"(?i)((?:api[_-]?key|token|secret|password)[\"']?\s*[=:]\s*[\"']?)[^\s\"',]{6,}"),
]
MASK = "***"
TEXT_FORMAT = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
# Libraries whose DEBUG lines carry message bodies (API request and response payloads).
CONTENT_LOGGERS = (
    "aiosqlite",
    "anthropic",
    "telegram",
    "slack_bolt",
    "slack_sdk",
    "mcp",
    "websockets",
    "aiohttp",
    "httpx",
    "httpcore",
)


def mask(value: str) -> str:
    """Keep a recognisable start and end of long values; hide short ones completely."""
    if len(value) >= 18:
        return f"{value[:6]}…{value[-4:]}"
    return MASK


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, mask(secret))
    for pattern in SECRET_PATTERNS:
        if pattern.groups:
            text = pattern.sub(lambda m: m.group(1) + MASK, text)
        else:
            text = pattern.sub(lambda m: mask(m.group(0)), text)
    return text


@contextlib.contextmanager
def redacted_stderr(
    logger: logging.Logger, prefix: str, secrets: Iterable[str]
) -> Iterator[TextIO]:
    """A file to hand a child process as its stderr: each line it writes is logged at INFO
    through `redact`, so a server that prints its environment leaks no token.

    The child's own stderr would otherwise go straight to Krill's stderr (and to the
    terminal running `krill doctor`), past the logging filter. A thread reads the pipe until
    every writer has closed it: this context's copy on exit, the child's when it ends.
    """
    secrets = [s for s in secrets if s]
    read_fd, write_fd = os.pipe()

    def pump() -> None:
        with os.fdopen(read_fd, encoding="utf-8", errors="replace") as lines:
            for line in lines:
                if line.strip():
                    logger.info("%s%s", prefix, redact(line.rstrip(), secrets))

    threading.Thread(target=pump, name=f"stderr {prefix}", daemon=True).start()
    with os.fdopen(write_fd, "w") as writer:
        yield writer


class RedactingFilter(logging.Filter):
    def __init__(self, secrets: Iterable[str] = ()):
        super().__init__()
        self.secrets = [s for s in secrets if s]

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message, self.secrets)
        if record.exc_info:
            # Tracebacks are rendered later by the formatter; render and clean them now.
            formatter = logging.Formatter()
            cleaned += "\n" + redact(formatter.formatException(record.exc_info), self.secrets)
            record.exc_info = None
            record.exc_text = None
        record.msg, record.args = cleaned, None
        return True


class ContentFilter(logging.Filter):
    """Replaces `Content` arguments by their length unless `logging.include_content` is on."""

    def __init__(self, include: bool):
        super().__init__()
        self.include = include

    def filter(self, record: logging.LogRecord) -> bool:
        if self.include:
            return True
        if isinstance(record.msg, Content):
            record.msg = record.msg.hidden()
        if isinstance(record.args, tuple):
            record.args = tuple(_hide(arg) for arg in record.args)
        elif isinstance(record.args, dict):
            record.args = {name: _hide(arg) for name, arg in record.args.items()}
        return True


def _hide(arg: object) -> object:
    return arg.hidden() if isinstance(arg, Content) else arg


class JsonFormatter(logging.Formatter):
    """One JSON object a line; `turn_id` and `session_key` come from `TurnContextFilter`."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        if record.exc_info:  # only when no RedactingFilter folded it into the message
            message += "\n" + self.formatException(record.exc_info)
        line = {
            "time": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname,
            "logger": record.name,
            "message": message,
            "turn_id": getattr(record, "turn_id", None),
            "session_key": getattr(record, "session_key", None),
        }
        return json.dumps(line, ensure_ascii=False)


def log_level(settings: LoggingConfig, flag: str | None, *, quiet: bool) -> str:
    """The level to log at: `--log-level`, else `$KRILL_LOG_LEVEL`, else `logging.level`
    when the operator set it; else INFO for the service and WARNING for `quiet` commands
    (`krill chat` and the other CLI commands, whose output is meant for a person)."""
    chosen = flag or os.environ.get("KRILL_LOG_LEVEL")
    if chosen:
        return chosen.upper()
    if "level" in settings.model_fields_set or not quiet:
        return settings.level
    return "WARNING"


def setup_logging(
    settings: LoggingConfig,
    secrets: Iterable[str] = (),
    *,
    level: str,
    log_file: Path | None = None,
) -> None:
    """Route every log line through one handler: to `log_file` (appended) or stderr, in
    `settings.format`, with message bodies hidden unless `settings.include_content`, and
    secrets redacted. Raises ConfigError naming `logging.file` when it cannot be written."""
    handler: logging.Handler
    if log_file is None:
        handler = logging.StreamHandler()
    else:
        try:
            log_file.parent.mkdir(parents=True, exist_ok=True)
            handler = logging.FileHandler(log_file, encoding="utf-8")
        except OSError as exc:
            raise ConfigError(
                f"logging.file: cannot write {log_file} ({exc.strerror}); "
                "fix its folder's permissions or choose another path"
            ) from None
    if settings.format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(TEXT_FORMAT)
    # The console's recent warnings pass the same filters: shown exactly as logged.
    for each in (handler, RECENT):
        each.filters[:] = []
        each.addFilter(TurnContextFilter())
        each.addFilter(ContentFilter(settings.include_content))  # before redaction renders
        each.addFilter(RedactingFilter(secrets))
    root = logging.getLogger()
    root.handlers[:] = [handler, RECENT]
    root.setLevel(level.upper())
    # Warnings and a crash's traceback would otherwise reach stderr without the filter.
    logging.captureWarnings(True)
    sys.excepthook = _log_uncaught
    # Library chatter at INFO (every HTTP request) drowns what operators need to see.
    for noisy in (
        "httpx",
        "httpx2",
        "httpcore",
        "httpcore2",
        "aiohttp.access",
        "apscheduler",
        "telegram.ext",
    ):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
    if not settings.include_content:
        # At DEBUG these dump whole request bodies: the person's words and the model's.
        for library in CONTENT_LOGGERS:
            logger = logging.getLogger(library)
            logger.setLevel(max(logging.INFO, logger.getEffectiveLevel()))


def _log_uncaught(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
    if issubclass(kind, KeyboardInterrupt):
        sys.__excepthook__(kind, exc, tb)
        return
    logging.getLogger("krill").critical("krill stopped on an error", exc_info=(kind, exc, tb))
