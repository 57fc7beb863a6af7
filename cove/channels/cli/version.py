"""What ``cove --version`` prints (a leaf: the fast path imports it before click)."""

from __future__ import annotations

from cove import __version__  # the package's one version number (pyproject reads it too)


def version_line() -> str:
    """``cove 0.1.0``."""
    return f"cove {__version__}"
