"""Configuration: one frozen ``Settings`` in five sections, built once at start-up, passed down.

``settings.model`` (the endpoint), ``settings.loop`` (a turn's bounds), ``settings.sandbox``
(workers and their limits), ``settings.store`` (where data lives) and ``settings.channels``
(what the web, Telegram and the server need). See ``sections.py`` for every field and
``sources.py`` for the environment variables and the TOML layout.
"""

from cove.config.sections import (
    DEFAULT_PRICES,
    MEMORY_DB,
    ChannelSettings,
    LoopSettings,
    ModelSettings,
    Price,
    SandboxSettings,
    StoreSettings,
    default_data_dir,
)
from cove.config.settings import Settings
from cove.config.sources import unknown_env_vars

__all__ = [
    "DEFAULT_PRICES",
    "MEMORY_DB",
    "ChannelSettings",
    "LoopSettings",
    "ModelSettings",
    "Price",
    "SandboxSettings",
    "Settings",
    "StoreSettings",
    "default_data_dir",
    "unknown_env_vars",
]
