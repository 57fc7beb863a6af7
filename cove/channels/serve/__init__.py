"""``cove serve``: web, Telegram and MCP as one service — one process, or several on one port
with conversation affinity — with health, metrics, logs and a graceful stop."""

from cove.channels.serve.service import ServeOptions, Service, run_service

__all__ = ["ServeOptions", "Service", "run_service"]
