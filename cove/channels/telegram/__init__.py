"""The Telegram channel: a bot where each chat owns a sandboxed conversation.

``TelegramChannel`` runs inside another program's event loop over a ``Conversations`` it does
not own; ``run_bot`` is the standalone ``cove telegram``. Options (token, Bot API URL,
allow-list, webhook) come from ``TelegramOptions.load``.
"""

from cove.channels.telegram.channel import TelegramChannel
from cove.channels.telegram.options import TelegramOptions
from cove.channels.telegram.standalone import run_bot

__all__ = ["TelegramChannel", "TelegramOptions", "run_bot"]
