"""``cove serve``: web and Telegram in one process, with health, metrics, logs and a
graceful stop; ``cove backup``: a consistent copy of the live database."""

from cove.channels.serve.service import ServeOptions, Service

__all__ = ["ServeOptions", "Service"]
