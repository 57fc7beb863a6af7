"""Persistence: the one SQLite database (store, migrations, value codec)."""
