"""Logging set-up with a redaction filter, so tokens and keys never reach a log line, and
a redacting pipe for what child processes write to stderr."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import threading
from collections.abc import Iterable, Iterator
from types import TracebackType
from typing import TextIO

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
