"""The PostgreSQL backend (``pip install 'cove[postgres]'``, on asyncpg): ``opening`` reaches
the server and migrates, ``database`` runs the units on a connection pool, ``commits`` tells of
other nodes' commits, ``dialect`` is where its SQL differs from SQLite's, ``url`` keeps
passwords out of messages. Only ``url`` is imported without asyncpg installed."""
