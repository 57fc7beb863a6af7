"""Keeping the bot token out of log lines."""

from __future__ import annotations

import logging

from cove.channels.telegram.secret import Secret


class Redact(logging.Filter):
    """Replaces a secret wherever it would appear in a log line."""

    def __init__(self, secret: Secret) -> None:
        super().__init__()
        self._secret = secret

    def filter(self, record: logging.LogRecord) -> bool:
        value = self._secret.reveal()
        if value:
            text = record.getMessage()
            if value in text:
                record.msg, record.args = text.replace(value, "<token>"), None
        return True


def quiet_http_logs() -> None:
    """httpx logs every request URL at INFO, and a Bot API URL holds the token: keep it out."""
    for name in ("httpx", "httpcore"):
        logging.getLogger(name).setLevel(logging.WARNING)


class Redaction:
    """Puts a ``Redact`` filter on the root logger's handlers for as long as the bot runs."""

    def __init__(self, secret: Secret) -> None:
        self.filter = Redact(secret)
        self._on: list[logging.Handler] = []

    def install(self) -> None:
        """Filter every handler the root logger has now."""
        for handler in logging.getLogger().handlers:
            if self.filter not in handler.filters:
                handler.addFilter(self.filter)
                self._on.append(handler)

    def remove(self) -> None:
        """Take the filter off again."""
        for handler in self._on:
            handler.removeFilter(self.filter)
        self._on.clear()
