"""Configuration: one frozen ``Settings`` in sections, built once at start-up, passed down.

The core's sections: ``settings.model`` (the endpoint), ``settings.loop`` (a turn's bounds),
``settings.sandbox`` (workers and their limits), ``settings.store`` (where data lives); the
channels': ``settings.web``, ``settings.telegram``, ``settings.serve`` and ``settings.tui``. See
``sections.py`` and ``channel_sections.py`` for every field and ``sources.py`` for the
environment variables and the TOML layout.
"""

from cove.config.channel_sections import (
    ServeSettings,
    TelegramSettings,
    TuiSettings,
    WebSettings,
)
from cove.config.extension_section import ExtensionSettings
from cove.config.sections import (
    DEFAULT_PRICES,
    MEMORY_DB,
    Endpoint,
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
    "Endpoint",
    "ExtensionSettings",
    "LoopSettings",
    "ModelSettings",
    "Price",
    "SandboxSettings",
    "ServeSettings",
    "Settings",
    "StoreSettings",
    "TelegramSettings",
    "TuiSettings",
    "WebSettings",
    "default_data_dir",
    "unknown_env_vars",
]
