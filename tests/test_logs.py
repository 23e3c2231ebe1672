"""Secrets never reach log output."""

from __future__ import annotations

import logging
import sys

from bot.logs import RedactingFilter, redact


def test_known_shapes_are_redacted() -> None:
    text = (
        "key sk-ant-api03-abcdefghijklmnop slack xoxb-123456-abcdef app xapp-1-A1-xyz123 "
        "telegram 123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw Authorization: Bearer abc.def.ghi123"
    )
    out = redact(text)
    for secret in (
        "abcdefghijklmnop",
        "abcdef app",
        "xyz123",
        "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw",
        "abc.def.ghi123",
    ):
        assert secret not in out


def test_configured_secrets_are_redacted_in_messages_and_tracebacks(caplog) -> None:
    logger = logging.getLogger("test.redact")
    handler_filter = RedactingFilter(["hunter2-very-secret-value"])
    logger.addFilter(handler_filter)
    try:
        with caplog.at_level(logging.INFO, logger="test.redact"):
            logger.info("connecting with %s", "hunter2-very-secret-value")
            try:
                raise ValueError("bad token hunter2-very-secret-value")
            except ValueError:
                logger.exception("failed")
    finally:
        logger.removeFilter(handler_filter)
    assert "hunter2-very-secret-value" not in caplog.text
    assert "hunter…alue" in caplog.text


def test_json_lines_are_redacted_and_carry_the_turn(tmp_path) -> None:
    import json

    from bot.config import LoggingConfig
    from bot.log_context import Content, turn_context
    from bot.logs import setup_logging

    path = tmp_path / "krill.log"
    settings = LoggingConfig(format="json")
    hook = sys.excepthook
    setup_logging(settings, ["hunter2-very-secret-value"], level="INFO", log_file=path)
    try:
        log = logging.getLogger("test.json")
        with turn_context("t-1", "agent:main:local:direct:ann"):
            log.info("said %s with %s", Content("a private body"), "hunter2-very-secret-value")
        log.warning("outside sk-ant-api03-abcdefghijklmnop")
    finally:
        logging.getLogger().handlers.clear()
        logging.captureWarnings(False)
        sys.excepthook = hook
    first, second = (json.loads(line) for line in path.read_text().splitlines())
    assert first["turn_id"] == "t-1"
    assert first["session_key"] == "agent:main:local:direct:ann"
    assert first["message"] == "said <14 chars> with hunter…alue"
    assert second["turn_id"] is None and "abcdefghijklmnop" not in second["message"]


def test_log_level_precedence(monkeypatch) -> None:
    from bot.config import LoggingConfig
    from bot.logs import log_level

    monkeypatch.delenv("KRILL_LOG_LEVEL", raising=False)
    assert log_level(LoggingConfig(), None, quiet=False) == "INFO"
    assert log_level(LoggingConfig(), None, quiet=True) == "WARNING"  # krill chat and friends
    assert log_level(LoggingConfig(level="debug"), None, quiet=True) == "DEBUG"
    assert log_level(LoggingConfig(level="debug"), "error", quiet=True) == "ERROR"
    monkeypatch.setenv("KRILL_LOG_LEVEL", "info")
    assert log_level(LoggingConfig(level="debug"), None, quiet=True) == "INFO"


def test_the_last_50_warnings_are_kept_as_the_log_shows_them(tmp_path) -> None:
    from bot.config import LoggingConfig
    from bot.log_context import Content
    from bot.log_tail import KEPT, RECENT
    from bot.logs import setup_logging

    path = tmp_path / "krill.log"
    hook = sys.excepthook
    setup_logging(LoggingConfig(), ["hunter2-very-secret-value"], level="INFO", log_file=path)
    try:
        log = logging.getLogger("test.tail")
        log.info("not a problem")
        for n in range(KEPT + 5):
            log.warning("try %d with %s: %s", n, "hunter2-very-secret-value", Content("a body"))
        try:
            raise ValueError("token=abcdefghijkl")
        except ValueError:
            log.exception("broke")
    finally:
        logging.getLogger().handlers.clear()
        logging.captureWarnings(False)
        sys.excepthook = hook
    kept = RECENT.newest_first()
    assert len(kept) == KEPT
    assert kept[0].level == "ERROR" and kept[0].message.startswith("broke\nTraceback")
    assert "abcdefghijkl" not in kept[0].message and "token=***" in kept[0].message
    assert kept[1].message == f"try {KEPT + 4} with hunter…alue: <6 chars>"
    assert kept[1].message in path.read_text()  # word for word as the log line
    assert kept[-1].message.startswith("try 6 ")
