"""Logging set-up with a redaction filter, so tokens and keys never reach a log line."""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Iterable
from types import TracebackType

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


def setup_logging(secrets: Iterable[str] = (), level: str | None = None) -> None:
    level = (level or os.environ.get("KRILL_LOG_LEVEL") or "INFO").upper()
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(RedactingFilter(secrets))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # Warnings and a crash's traceback would otherwise reach stderr without the filter.
    logging.captureWarnings(True)
    sys.excepthook = _log_uncaught
    # Library chatter at INFO (every HTTP request) drowns what operators need to see.
    for noisy in ("httpx", "httpx2", "httpcore", "aiohttp.access", "apscheduler", "telegram.ext"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))


def _log_uncaught(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
    if issubclass(kind, KeyboardInterrupt):
        sys.__excepthook__(kind, exc, tb)
        return
    logging.getLogger("krill").critical("krill stopped on an error", exc_info=(kind, exc, tb))
