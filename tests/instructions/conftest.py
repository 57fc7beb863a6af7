"""The instruction and model tests run on both backends, as the conversation layer's do (the
same hooks: every test with a ``tmp_path`` runs once on SQLite and once on PostgreSQL, unless
its module says ``ONE_BACKEND = True``)."""

from tests.conversation.conftest import _database, pytest_generate_tests

__all__ = ["_database", "pytest_generate_tests"]
