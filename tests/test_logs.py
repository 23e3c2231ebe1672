"""Secrets never reach log output."""

from __future__ import annotations

import logging

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
