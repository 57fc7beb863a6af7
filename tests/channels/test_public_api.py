"""Channels use the conversation layer's public API only.

The import contracts see imports, not attribute reads: a channel could still reach past
``Conversations`` at run time (its store, worker pool, live cache, watchers). Every channel
holds its ``Conversations`` as ``convs`` (``convs``, ``self.convs``, ``app.state.convs``, …);
each member read through that name must be a public member of the class.
"""

from __future__ import annotations

import ast
from pathlib import Path

import cove.channels
from cove.conversation import Conversations

CHANNELS = Path(cove.channels.__file__).parent
#: Public data attributes (the rest of the API is the class's methods and properties).
PUBLIC_DATA = {"settings", "owner", "new_ids"}


def receiver_name(node: ast.expr) -> str | None:
    """The last name of an attribute's receiver: ``convs`` for ``self.app.convs.get``."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def reads_through_convs() -> list[tuple[str, int, str]]:
    """Every ``<...>.convs.<member>`` in the channels: (file, line, member)."""
    found = []
    for path in sorted(CHANNELS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Attribute) and receiver_name(node.value) == "convs":
                found.append((str(path.relative_to(CHANNELS)), node.lineno, node.attr))
    return found


def is_public(member: str) -> bool:
    return not member.startswith("_") and (member in PUBLIC_DATA or hasattr(Conversations, member))


def test_channels_read_only_public_members_of_conversations() -> None:
    reads = reads_through_convs()
    assert len(reads) > 100  # the channels' use of the API was found: the check is not vacuous
    internal = [
        f"{path}:{line}: convs.{member}" for path, line, member in reads if not is_public(member)
    ]
    assert internal == [], "channels reach past the public conversation API:\n" + "\n".join(
        internal
    )


def test_the_check_catches_a_read_of_an_internal() -> None:
    assert not is_public("_store") and not is_public("store") and not is_public("watching")
    assert is_public("send") and is_public("stats") and is_public("settings")
