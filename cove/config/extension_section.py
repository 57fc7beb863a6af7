"""The ``extensions`` section of the settings: which extensions, what they may do, how long to ask.

In a TOML file::

    [extensions]
    enabled = ["notes_read", "notes_add"]   # default: every installed extension
    policy = ["write=ask", "network=deny", "notes_read=allow"]
    approval_timeout_s = 60

Flat keys (and environment variables): ``extensions`` (``COVE_EXTENSIONS=core,files``),
``extension_policy`` (``COVE_EXTENSION_POLICY=write=ask,network=deny``) and
``approval_timeout_s``. A policy entry is ``NAME=allow|ask|deny`` where NAME is a function, an
extension or an effect (``docs/plugins.md``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from cove.config.checks import FLAT_KEY, invalid, positive

_ENTRY = re.compile(r"\s*[A-Za-z_][A-Za-z0-9_]*\s*=\s*(allow|ask|deny)\s*")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class ExtensionSettings:
    """Which extensions a new conversation gets and the approval policy of their calls."""

    # The extensions a new conversation gets, by name; None: every installed one. Recorded
    # with the conversation: changing it later does not change existing conversations.
    enabled: tuple[str, ...] | None = field(default=None, metadata={FLAT_KEY: "extensions"})
    policy: tuple[str, ...] = field(default=(), metadata={FLAT_KEY: "extension_policy"})
    approval_timeout_s: float = 120.0  # no answer within this: the call is denied

    def __post_init__(self) -> None:
        positive(self, "approval_timeout_s")
        for name in self.enabled or ():
            if not _NAME.fullmatch(name):
                raise invalid(self, "enabled", f"has {name!r}, which is not an extension name")
        for entry in self.policy:
            if not _ENTRY.fullmatch(entry):
                raise invalid(
                    self,
                    "policy",
                    f"has {entry!r}: each entry is NAME=allow, NAME=ask or NAME=deny "
                    "(NAME: a function, an extension or an effect)",
                )
