"""The web channel: ``cove web`` serves a chat, a conversation list and an inspector.

``create_app`` builds the Starlette application; everything goes through ``Conversations``.
"""

from cove.channels.web.app import create_app, stop_app

__all__ = ["create_app", "stop_app"]
