"""The watch path: how every event a turn publishes reaches whoever watches its conversation.

- ``hub``: one ``ConversationHub`` a conversation, with its ring of recent events and its
  watchers; ``sequence`` numbers the events (``seq``).
- ``watching``: the process's hubs, taps and commit poller; ``follow`` follows turns another
  process runs; ``rebuild`` rebuilds events from committed rows.
- ``api``: the ``watch`` and ``watch_list`` methods of ``Conversations``; ``stream`` and
  ``lists`` are what they return; ``coalesce`` paces model deltas for the hub.
"""
