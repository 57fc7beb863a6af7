"""The install extras a command needs, checked where the CLI hands over to a channel.

``pip install cove`` installs what ``cove run``, ``chat``, the inspection commands, ``replay``,
``doctor`` and ``backup`` need. A channel comes with an extra (``pyproject.toml``); ``require``
turns a missing one into a ``MissingExtra``: one line naming the ``pip install`` to run, exit
code 2, before anything of the channel is imported or started.
"""

from __future__ import annotations

import importlib.util

from cove.errors import MissingExtra

_WEB = ("starlette", "uvicorn", "jinja2", "markdown_it", "pygments", "nh3")
_TELEGRAM = ("telegram", "aiolimiter", "markdown_it", "starlette", "uvicorn")

EXTRAS: dict[str, tuple[str, ...]] = {
    "web": _WEB,
    "tui": ("textual",),
    "telegram": _TELEGRAM,
    "serve": ("prometheus_client", *dict.fromkeys(_WEB + _TELEGRAM)),
    "mcp": ("mcp",),
}
"""Each channel's extra and the top-level modules it installs that cove imports (a test keeps
this in step with ``pyproject.toml``)."""


def missing(extra: str) -> list[str]:
    """The modules of ``extra`` that cannot be imported here, in the order of ``EXTRAS``."""
    return [name for name in EXTRAS[extra] if importlib.util.find_spec(name) is None]


def require(extra: str, what: str) -> None:
    """Make sure ``extra`` is installed before ``what`` (a command) imports its channel.

    Raises:
        MissingExtra: A module of the extra is not installed.
    """
    absent = missing(extra)
    if absent:
        raise MissingExtra(what, extra, absent)
