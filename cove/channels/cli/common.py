"""Pieces shared by the command modules."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path


def add_common(parser: argparse.ArgumentParser) -> None:
    """Accept the global ``--db`` and ``--model`` flags after the command name too."""
    parser.add_argument("--db", default=argparse.SUPPRESS, help="database path")
    parser.add_argument("--model", default=argparse.SUPPRESS, help="model name")


def positive_int(text: str) -> int:
    """An argparse type for a positive integer."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
    return value


def when(timestamp: float | None) -> str:
    """A timestamp as local ``YYYY-MM-DD HH:MM``."""
    if timestamp is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(timestamp))


def program() -> str:
    """How to invoke ``cove`` again: ``cove`` when that is on PATH, else the path used now."""
    used = sys.argv[0]
    if Path(used).name != "cove" or shutil.which("cove") == os.path.abspath(used):
        return "cove"
    return os.path.relpath(used)
