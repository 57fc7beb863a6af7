"""Structured logs for ``cove serve`` through the standard ``logging`` module.

Off a terminal every record is one JSON object per line (for journald, Docker, Loki…); on a
terminal it is one readable line. Every line carries the request id, the conversation id and
the turn of the work it belongs to, taken from context variables: the HTTP middleware sets the
request id (a turn sent by that request inherits it), and the event tap sets the conversation
and turn as soon as a turn starts (``bind_turn``). Records never carry secrets, and cove's own
serve-side records carry no user content above DEBUG.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from contextvars import ContextVar
from typing import Any, TextIO

REQUEST_ID: ContextVar[str | None] = ContextVar("cove_request_id", default=None)
CONVERSATION: ContextVar[str | None] = ContextVar("cove_conversation_id", default=None)
TURN: ContextVar[int | None] = ContextVar("cove_turn", default=None)
#: This process's index among ``cove serve --processes N`` (None when it serves alone).
PROCESS: ContextVar[int | None] = ContextVar("cove_serve_process", default=None)

_FIELDS = ("request_id", "conversation_id", "turn")


def bind_turn(conversation_id: str, turn: int) -> None:
    """Label the current task's later log records with a conversation and turn position."""
    CONVERSATION.set(conversation_id)
    TURN.set(turn)


class ContextFilter(logging.Filter):
    """Copies the context variables onto every record (None when unknown)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = getattr(record, "request_id", None) or REQUEST_ID.get()
        record.conversation_id = getattr(record, "conversation_id", None) or CONVERSATION.get()
        record.turn = getattr(record, "turn", None) or TURN.get()
        record.serve_process = getattr(record, "serve_process", None) or PROCESS.get()
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message, ids, exception."""

    def format(self, record: logging.LogRecord) -> str:
        body: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for name in _FIELDS:
            body[name] = getattr(record, name, None)
        process = getattr(record, "serve_process", None)
        if process is not None:
            body["process"] = process
        for name, value in getattr(record, "fields", {}).items():
            body.setdefault(name, value)
        if record.exc_info:
            body["exc"] = self.formatException(record.exc_info)
        return json.dumps(body, default=str, ensure_ascii=False)


class ReadableFormatter(logging.Formatter):
    """``HH:MM:SS level logger [conv/turn req] message key=value…`` for a person at a terminal."""

    def format(self, record: logging.LogRecord) -> str:
        ids = []
        conversation, turn = getattr(record, "conversation_id", None), getattr(record, "turn", None)
        if conversation:
            ids.append(f"{conversation[:8]}/{turn}" if turn is not None else conversation[:8])
        request = getattr(record, "request_id", None)
        if request:
            ids.append(f"req {request}")
        process = getattr(record, "serve_process", None)
        if process is not None:
            ids.insert(0, f"p{process}")
        where = f" [{' '.join(ids)}]" if ids else ""
        extra = " ".join(f"{k}={v}" for k, v in getattr(record, "fields", {}).items())
        line = (
            f"{time.strftime('%H:%M:%S', time.localtime(record.created))} "
            f"{record.levelname.lower():<7} {record.name}{where} {record.getMessage()}"
            + (f" {extra}" if extra else "")
        )
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def configure_logging(
    level: str = "INFO", stream: TextIO | None = None, json_lines: bool | None = None
) -> logging.Handler:
    """Send ``cove`` and ``uvicorn`` records to ``stream`` (stderr), JSON unless a terminal.

    Returns the handler installed (replacing any earlier one of this function).
    """
    stream = stream or sys.stderr
    if json_lines is None:
        json_lines = not stream.isatty()
    handler = logging.StreamHandler(stream)
    handler.set_name("cove-serve")
    handler.addFilter(ContextFilter())
    handler.setFormatter(JsonFormatter() if json_lines else ReadableFormatter())
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == "cove-serve"]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    for noisy in ("uvicorn.access", "httpx", "httpcore", "openai"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
    return handler
