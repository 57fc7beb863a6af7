"""Registers every ``cove`` sub-command; each group lives in its own module."""

from __future__ import annotations

from typing import Any

from cove.channels.cli import (
    demo,
    doctor,
    inspect,
    manage,
    serve,
    talk,
    telegram,
    tui,
    watch,
    web,
)


def register(sub: Any) -> None:
    """Add every command to the ``argparse`` sub-parsers object ``sub``."""
    talk.register(sub)
    inspect.register(sub)
    manage.register(sub)
    demo.register(sub)
    doctor.register(sub)
    watch.register(sub)
    web.register(sub)
    tui.register(sub)
    telegram.register(sub)
    serve.register(sub)
