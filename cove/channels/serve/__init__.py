"""``cove serve``: web and Telegram in one process, with health, metrics, logs and a
graceful stop."""

from cove.channels.serve.service import ServeOptions, Service

__all__ = ["ServeOptions", "Service"]
