"""The one place the TUI turns errors into what a person should read and do."""

from __future__ import annotations

from typing import Literal

from cove.errors import Busy, ConfigError, CoveError, ModelError, NotFound, StoreError

Severity = Literal["information", "warning", "error"]


def advice(exc: BaseException) -> tuple[str, Severity]:
    """A notification text (what happened and what to do) and its severity."""
    if isinstance(exc, ConfigError):
        return f"{exc}. Browsing still works; restart cove tui once it is set.", "error"
    if isinstance(exc, Busy):
        return f"{exc}.", "warning"
    if isinstance(exc, NotFound):
        return f"{exc}.", "warning"
    if isinstance(exc, StoreError):
        return f"database problem: {exc}. Check the file with `cove doctor`.", "error"
    if isinstance(exc, ModelError):
        return f"model endpoint failed: {exc}. Check it is up (`cove doctor`).", "error"
    if isinstance(exc, CoveError):
        return str(exc), "error"
    return f"unexpected {type(exc).__name__}: {exc} (the app keeps running)", "error"


def turn_failure(status: str, error: str | None) -> tuple[str, Severity] | None:
    """What to tell the sender when a turn did not end ``done``; None when nothing to say."""
    if status == "failed":
        return (
            f"the turn failed: {error or 'no reason recorded'}. If the model endpoint is down, "
            "start it (or fix OPENAI_BASE_URL) and send again.",
            "error",
        )
    if status in ("max_iterations", "error_budget", "interrupted"):
        return f"the turn ended {status.replace('_', ' ')}: {error or ''}".rstrip(": "), "warning"
    return None
