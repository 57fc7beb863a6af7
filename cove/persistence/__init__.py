"""Persistence: the one SQLite database (store, migrations)."""
