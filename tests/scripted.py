"""Helpers shared by the tests: settings on a temporary data directory, scripted model replies."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cove.config import Settings
from tests.backends import database_for


def settings_for(tmp_path: Path, **changes: Any) -> Settings:
    """Settings whose data lives under ``tmp_path``, with one pre-started worker.

    ``changes`` are flat keys, routed to their section: ``settings_for(tmp, max_iterations=3)``.
    The sandbox's data libraries are off unless asked for (``sandbox_libraries=True``): loading
    them costs every zygote a second or more, which tests of other layers do not need.
    """
    defaults: dict[str, Any] = {"worker_pool_size": 1, "sandbox_libraries": False}
    database = database_for(tmp_path)
    if database is not None:  # the test runs on PostgreSQL (tests/backends.py)
        defaults["db_path"] = database
    return Settings.load(env={}, data_dir=tmp_path, **{**defaults, **changes})


def reply(
    code: list[str] | None = None, answer: str | None = None, *, thinking: str = "t", **extra: Any
) -> str:
    """One model reply in cove's JSON protocol (``extra`` adds fields such as ``title``)."""
    body: dict[str, Any] = {"thinking": thinking, **extra}
    if code is not None:
        body["code"] = code
    if answer is not None:
        body["answer"] = answer
    return json.dumps(body)
