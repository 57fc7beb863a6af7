"""The one place where errors become HTTP responses (JSON under ``/api``, a page elsewhere)."""

from __future__ import annotations

from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from cove.errors import (
    Busy,
    ConfigError,
    CoveError,
    ModelError,
    NotFound,
    QuotaExceeded,
    SandboxError,
    StoreError,
)


class BadInput(CoveError):
    """A request the API cannot use (missing field, wrong type, bad file name): 422."""


class TooLarge(CoveError):
    """A request body over the configured limit: 413."""


def status_of(exc: Exception) -> int:
    """The HTTP status for an exception raised while serving a request."""
    if isinstance(exc, HTTPException):
        return exc.status_code
    if isinstance(exc, NotFound):
        return 404
    if isinstance(exc, Busy):
        return 409
    if isinstance(exc, TooLarge | QuotaExceeded):
        return 413
    if isinstance(exc, (StoreError, SandboxError, ConfigError)):
        return 503  # the server cannot serve it now; the request itself was fine
    if isinstance(exc, ModelError):
        return 502  # the model endpoint failed (listing its models, checking one)
    if isinstance(exc, CoveError):
        return 422
    return 500


#: What a page says when another process holds the conversation (its lease owner is internal).
BUSY_ELSEWHERE = (
    "Another cove window or process is running a turn in this conversation; "
    "try again when it finishes."
)


def message_of(exc: Exception) -> str:
    """What the person is told about ``exc``: never a traceback, a foreign exception's text or
    a lease owner's id."""
    if isinstance(exc, HTTPException):
        return str(exc.detail)
    if isinstance(exc, Busy) and exc.owner is not None:
        return BUSY_ELSEWHERE
    if isinstance(exc, CoveError):
        return exc.message
    return "internal error"


def _kind(exc: Exception) -> str:
    return type(exc).__name__ if isinstance(exc, CoveError) else "http"


async def handle(request: Request, exc: Exception) -> Response:
    """Starlette exception handler for ``CoveError``, ``HTTPException`` and anything else."""
    status = status_of(exc)
    message = message_of(exc)
    if request.url.path.startswith("/api/") or request.url.path == "/api":
        body: dict[str, Any] = {"error": _kind(exc), "message": message, "status": status}
        return JSONResponse(body, status_code=status)
    templates = request.app.state.templates
    page: Response = templates.TemplateResponse(
        request, "error.html", {"status": status, "message": message}, status_code=status
    )
    return page
