"""The Telegram channel: a bot where each chat owns a sandboxed conversation.

``TelegramChannel`` runs inside another program's event loop over a ``Conversations`` it does
not own; ``run_bot`` is the standalone ``cove telegram``. Everything they are configured with
(token, Bot API URL, allow-list, webhook, rates) is ``settings.telegram``.
"""

from cove.channels.telegram.channel import TelegramChannel
from cove.channels.telegram.standalone import run_bot

__all__ = ["TelegramChannel", "run_bot"]
