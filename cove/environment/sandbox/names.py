"""What may be a variable's name: one rule, kept by the worker and checked again by the host.

A variable's name reaches the database, the next prompt and every channel's display, so the host
never takes a worker's word for it: a name that breaks the rule is a protocol error
(``host/replies.py``). The worker keeps the rule itself — its compiler refuses a block that would
bind such a name (``worker/policy.py``) — so only a worker taken over by its code breaks it.
"""

from __future__ import annotations

import keyword
from collections.abc import Collection

MAX_NAME_CHARS = 100
"""The longest variable (or import binding) name."""


def name_problem(name: object, reserved: Collection[str] = ()) -> str | None:
    """Why ``name`` cannot name a variable, or None when it can.

    A variable's name is a public identifier (no leading ``_``, not a keyword) of at most
    ``MAX_NAME_CHARS`` characters that is not in ``reserved`` (the names extensions bind).
    """
    if type(name) is not str:
        return "a variable name must be a string"
    if not name.isidentifier() or keyword.iskeyword(name):
        return f"{name[:40]!r} is not an identifier"
    if name.startswith("_"):
        return f"{name[:40]!r} starts with '_'"
    if len(name) > MAX_NAME_CHARS:
        return f"a name of {len(name):,} characters is longer than {MAX_NAME_CHARS}"
    if name in reserved:
        return f"{name!r} is provided by an extension"
    return None


def module_problem(module: object, member: object) -> str | None:
    """Why ``(module, member)`` cannot be an import binding's target, or None when it can.

    ``module`` is a dotted name of identifiers, ``member`` None or a public identifier; each
    part is at most ``MAX_NAME_CHARS`` characters.
    """
    if type(module) is not str or not module:
        return "an import binding's module must be a name"
    for part in module.split("."):
        if name_problem(part) is not None:
            return f"module {module[:40]!r} is not a dotted name"
    if member is not None and name_problem(member) is not None:
        return f"member {str(member)[:40]!r} is not a public name"
    return None
