"""cove's resources are named under one URI scheme, ``cove://``.

::

    cove://conversations                                   the conversations, newest first
    cove://conversations/{id}                              one conversation: its transcript
    cove://conversations/{id}/variables                    its variables' current versions
    cove://conversations/{id}/variables/{name}             a variable's current value, in full
    cove://conversations/{id}/variables/{name}/versions    every version of a variable
    cove://conversations/{id}/variables/{name}/versions/{version}   one version's value
    cove://conversations/{id}/figures/{digest}             a figure a block made (PNG)
"""

from __future__ import annotations

SCHEME = "cove://"
CONVERSATIONS = f"{SCHEME}conversations"
CONVERSATION = CONVERSATIONS + "/{conversation}"
VARIABLES = CONVERSATION + "/variables"
VARIABLE = VARIABLES + "/{name}"
VERSIONS = VARIABLE + "/versions"
VERSION = VERSIONS + "/{version}"
FIGURE = CONVERSATION + "/figures/{digest}"


def conversation(conversation_id: str) -> str:
    """The URI of a conversation's transcript."""
    return CONVERSATION.format(conversation=conversation_id)


def variable(conversation_id: str, name: str) -> str:
    """The URI of a variable's current value."""
    return VARIABLE.format(conversation=conversation_id, name=name)


def figure(conversation_id: str, digest: str) -> str:
    """The URI of a figure's PNG."""
    return FIGURE.format(conversation=conversation_id, digest=digest)
