"""``Settings``: the sections together, built once at start-up and passed down.

Sources, lowest precedence first: defaults < TOML file < environment < explicit overrides (CLI
flags). Nothing here reads the environment at import time; ``Settings.load`` is handed the
mapping (only the default data directory comes from ``platformdirs``, which looks at the
process's own ``HOME``/``XDG_DATA_HOME``). A bad value's error names the setting and where the
value came from (the environment variable, the config file and its table).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cove.config.channel_sections import (
    ServeSettings,
    TelegramSettings,
    TuiSettings,
    WebSettings,
)
from cove.config.coerce import coerce
from cove.config.extension_section import ExtensionSettings
from cove.config.keys import KEYS
from cove.config.sections import (
    LoopSettings,
    ModelSettings,
    SandboxSettings,
    StoreSettings,
    default_data_dir,
)
from cove.config.sources import Given, from_env, read_toml
from cove.errors import ConfigError


@dataclass(frozen=True)
class Settings:
    """Every tunable of cove, in sections. Build with ``Settings.load``; it is frozen.

    Each part takes only the section it needs (the worker pool a ``SandboxSettings``, the model
    client a ``ModelSettings``, the Telegram bot a ``TelegramSettings``, ...).
    """

    model: ModelSettings = field(default_factory=ModelSettings)
    loop: LoopSettings = field(default_factory=LoopSettings)
    sandbox: SandboxSettings = field(default_factory=SandboxSettings)
    store: StoreSettings = field(default_factory=StoreSettings)
    web: WebSettings = field(default_factory=WebSettings)
    telegram: TelegramSettings = field(default_factory=TelegramSettings)
    serve: ServeSettings = field(default_factory=ServeSettings)
    tui: TuiSettings = field(default_factory=TuiSettings)
    extensions: ExtensionSettings = field(default_factory=ExtensionSettings)

    def replace(self, **changes: Any) -> Settings:
        """A copy with ``changes`` applied, given by flat key (``max_iterations=3``, ``model=...``).

        Raises:
            ConfigError: On an unknown key, a value of the wrong type or an invalid value.
        """
        return self._with({flat: Given(value) for flat, value in changes.items()})

    @classmethod
    def load(
        cls,
        env: Mapping[str, str] | None = None,
        toml_path: str | Path | None = None,
        **overrides: Any,
    ) -> Settings:
        """Build settings from defaults < TOML file < environment < ``overrides``.

        Tests build theirs as ``Settings.load(env={}, data_dir=tmp_path, max_iterations=3)``.

        Args:
            env: The environment mapping (``os.environ`` when None).
            toml_path: A TOML file; default ``$COVE_CONFIG``, else ``<data_dir>/config.toml``
                when it exists.
            **overrides: Explicit values by flat key (CLI flags); ``None`` values are ignored.

        Raises:
            ConfigError: On an unknown key, a value of the wrong type or an invalid value; it
                names the setting and, for a value from a file or the environment, where.
        """
        env = os.environ if env is None else env
        given = {k: v for k, v in overrides.items() if v is not None}
        values: dict[str, Given] = {}
        path = Path(toml_path) if toml_path else _default_toml(env, given.get("data_dir"))
        if path is not None:
            values.update(read_toml(path))
        values.update(from_env(env))
        values.update({flat: Given(value) for flat, value in given.items()})
        return cls()._with(values)

    def _with(self, values: Mapping[str, Given]) -> Settings:
        unknown = sorted(set(values) - KEYS.keys())
        if unknown:
            raise ConfigError(f"unknown setting(s): {', '.join(unknown)}")
        by_section: dict[str, dict[str, Any]] = {}
        for flat, given in values.items():
            key = KEYS[flat]
            by_section.setdefault(key.section, {})[key.field] = coerce(
                key, given.value, given.source
            )
        try:
            sections = {
                name: dataclasses.replace(getattr(self, name), **fields)
                for name, fields in by_section.items()
            }
        except ConfigError as exc:
            source = _source(values, exc.setting)
            if source is None:
                raise
            raise ConfigError(f"{exc.message} ({source})", setting=exc.setting) from None
        return dataclasses.replace(self, **sections)


def _source(values: Mapping[str, Given], flat: str | None) -> str | None:
    given = values.get(flat) if flat is not None else None
    return None if given is None else given.source


def _default_toml(env: Mapping[str, str], data_dir: Any) -> Path | None:
    explicit = env.get("COVE_CONFIG")
    if explicit:
        return Path(explicit)
    base = data_dir or env.get("COVE_DATA_DIR") or default_data_dir()
    candidate = Path(base).expanduser() / "config.toml"
    return candidate if candidate.is_file() else None
