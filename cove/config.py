"""Configuration: one frozen ``Settings`` built once at start-up and passed down.

Sources, lowest precedence first: defaults < TOML file < environment < explicit overrides (CLI
flags). Nothing here reads the environment at import time; ``Settings.load`` is handed the mapping.

Environment variables: ``COVE_DB``, ``COVE_MODEL``, ``OPENAI_BASE_URL``, ``OPENAI_API_KEY`` and
``COVE_<FIELD>`` for any other field (e.g. ``COVE_MAX_ITERATIONS=20``). The API key is never
written to the database, logs or events, and is hidden from ``repr``.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cove.errors import ConfigError

MEMORY_DB = ":memory:"


def default_data_dir(env: Mapping[str, str]) -> Path:
    """The user data directory: ``$XDG_DATA_HOME/cove`` or ``~/.local/share/cove``."""
    base = env.get("XDG_DATA_HOME") or str(Path(env.get("HOME", "~")).expanduser() / ".local/share")
    return Path(base) / "cove"


@dataclass(frozen=True)
class Price:
    """Price of a model in US dollars per million tokens."""

    input_per_mtok: float
    output_per_mtok: float


DEFAULT_PRICES: dict[str, Price] = {
    "gpt-4o": Price(2.5, 10.0),
    "gpt-4o-mini": Price(0.15, 0.6),
    "gpt-4.1": Price(2.0, 8.0),
    "gpt-4.1-mini": Price(0.4, 1.6),
    "gpt-4.1-nano": Price(0.1, 0.4),
    "o4-mini": Price(1.1, 4.4),
    "gpt-5": Price(1.25, 10.0),
    "gpt-5-mini": Price(0.25, 2.0),
}


@dataclass(frozen=True)
class Settings:
    """Every tunable of cove. Build with ``Settings.load``; never mutate (it is frozen)."""

    # Where things live.
    data_dir: Path = field(default_factory=lambda: default_data_dir(os.environ))
    db_path: str = ""  # "" means data_dir / "cove.db"; ":memory:" for tests
    workspaces_dir: str = ""  # "" means data_dir / "workspaces"

    # The model.
    model: str = "gpt-4.1-mini"
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    request_timeout_s: float = 120.0
    max_retries: int = 4
    retry_base_delay_s: float = 0.5
    reasoning_effort: bool = False  # send reasoning_effort to the endpoint
    prices: Mapping[str, Price] = field(default_factory=lambda: dict(DEFAULT_PRICES))

    # The loops.
    max_iterations: int = 10
    max_extra_iterations_per_call: int = 10
    max_extra_iterations_total: int = 30
    error_budget: int = 5
    max_restarts: int = 2
    subquery_concurrency: int = 4
    subquery_max_per_turn: int = 64

    # The sandbox.
    block_timeout_s: float = 10.0
    block_timeout_min_s: float = 1.0
    block_timeout_max_s: float = 120.0
    worker_memory_mb: int = 1024
    worker_cpu_s: int = 300
    worker_file_size_mb: int = 64
    worker_open_files: int = 64
    output_limit_chars: int = 20_000
    snapshot_limit_bytes: int = 1_000_000
    worker_pool_size: int = 2
    max_file_read_bytes: int = 5_000_000
    sandbox_confine: bool = True  # workers drop to nobody and lose the network where possible
    sandbox_fork_server: bool = True  # workers are forked from a pre-initialised zygote
    # Host time one block may spend in extension calls (llm_query included); the block's own
    # clock stops during those calls, so this is what bounds a loop of them.
    extension_time_budget_s: float = 120.0
    workspace_quota_mb: int = 512  # total size of one conversation's workspace files

    # The conversation layer.
    max_live_environments: int = 32
    lease_ttl_s: float = 30.0

    # -- The Telegram channel (``cove telegram``); read only by cove.channels.telegram.options.
    # The bot token is not a setting: it comes from TELEGRAM_BOT_TOKEN and is never stored.
    telegram_api_url: str = "https://api.telegram.org"  # a self-hosted Bot API server works too
    telegram_allow: str = ""  # comma-separated Telegram user and chat ids; empty refuses all
    telegram_webhook_url: str = ""  # empty: long polling
    # -- end of the Telegram block.

    @property
    def database(self) -> str:
        """The database path actually used."""
        return self.db_path or str(self.data_dir / "cove.db")

    @property
    def workspaces(self) -> Path:
        """The directory holding one workspace directory per conversation."""
        return Path(self.workspaces_dir) if self.workspaces_dir else self.data_dir / "workspaces"

    def price_of(self, model: str) -> Price | None:
        """The price entry for ``model``, or None when the model is unknown."""
        return self.prices.get(model)

    def replace(self, **changes: Any) -> Settings:
        """A copy with ``changes`` applied and validated."""
        unknown = set(changes) - set(_FIELD_TYPES)
        if unknown:
            raise ConfigError(f"unknown setting(s): {', '.join(sorted(unknown))}")
        coerced = {name: _coerce(name, value) for name, value in changes.items()}
        return _validated(dataclasses.replace(self, **coerced))

    @classmethod
    def load(
        cls,
        env: Mapping[str, str] | None = None,
        toml_path: str | Path | None = None,
        **overrides: Any,
    ) -> Settings:
        """Build settings from defaults < TOML file < environment < ``overrides``.

        Args:
            env: The environment mapping (``os.environ`` when None).
            toml_path: A TOML file; default ``$COVE_CONFIG``, else ``<data_dir>/config.toml``
                when it exists.
            **overrides: Explicit values (CLI flags); ``None`` values are ignored.

        Raises:
            ConfigError: On an unknown key or a value of the wrong type.
        """
        env = os.environ if env is None else env
        values: dict[str, Any] = {"data_dir": default_data_dir(env)}
        data_dir_env = env.get("COVE_DATA_DIR")
        if data_dir_env:
            values["data_dir"] = Path(data_dir_env)
        path = Path(toml_path) if toml_path else _default_toml(env, values["data_dir"])
        if path is not None:
            values.update(_read_toml(path))
        if data_dir_env:  # the environment outranks the TOML file
            values["data_dir"] = Path(data_dir_env)
        values.update(_from_env(env))
        values.update({k: v for k, v in overrides.items() if v is not None})
        unknown = set(values) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ConfigError(f"unknown setting(s): {', '.join(sorted(unknown))}")
        coerced = {name: _coerce(name, value) for name, value in values.items()}
        return _validated(cls(**coerced))


_ENV_ALIASES = {
    "COVE_DB": "db_path",
    "COVE_MODEL": "model",
    "OPENAI_BASE_URL": "base_url",
    "OPENAI_API_KEY": "api_key",
}
_FIELD_TYPES = {f.name: f.type for f in dataclasses.fields(Settings)}


def _default_toml(env: Mapping[str, str], data_dir: Path) -> Path | None:
    explicit = env.get("COVE_CONFIG")
    if explicit:
        return Path(explicit)
    candidate = data_dir / "config.toml"
    return candidate if candidate.is_file() else None


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from exc
    prices = data.pop("prices", None)
    if prices is not None:
        try:
            data["prices"] = {
                name: Price(float(p["input"]), float(p["output"])) for name, p in prices.items()
            }
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise ConfigError(
                f"{path}: [prices] needs one table per model with numeric input and output "
                f"prices per million tokens ({exc!r})"
            ) from exc
    return data


def _from_env(env: Mapping[str, str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for key, raw in env.items():
        if key in _ENV_ALIASES:
            values[_ENV_ALIASES[key]] = raw
        elif key.startswith("COVE_") and key not in ("COVE_CONFIG", "COVE_DATA_DIR"):
            name = key[5:].lower()
            if name in _FIELD_TYPES and name != "prices":
                values[name] = raw
    return values


def _coerce(name: str, value: Any) -> Any:
    kind = str(_FIELD_TYPES[name])
    if not isinstance(value, str) or kind in ("str", "str | None"):
        return _checked(name, kind, value)
    try:
        if kind == "int":
            return int(value)
        if kind == "float":
            return float(value)
        if kind == "bool":
            if value.lower() in ("1", "true", "yes", "on"):
                return True
            if value.lower() in ("0", "false", "no", "off", ""):
                return False
            raise ValueError(value)
        if kind == "Path":
            return Path(value).expanduser()
    except ValueError as exc:
        raise ConfigError(f"setting {name} expects {kind}, got {value!r}") from exc
    raise ConfigError(f"setting {name} cannot be given as text")


def _checked(name: str, kind: str, value: Any) -> Any:
    # Values from TOML, overrides and replace() arrive typed; a wrong type must be a ConfigError
    # here, not a TypeError deep in the core.
    ok = {
        "int": type(value) is int,
        "float": type(value) in (int, float),
        "bool": type(value) is bool,
        "str": isinstance(value, str),
        "str | None": value is None or isinstance(value, str),
        "Path": isinstance(value, (str, Path)),
        "Mapping[str, Price]": isinstance(value, Mapping)
        and all(isinstance(p, Price) for p in value.values()),
    }.get(kind, True)
    if not ok:
        raise ConfigError(f"setting {name} expects {kind}, got {value!r}")
    if kind == "float":
        return float(value)
    if kind == "Path":
        return Path(value).expanduser()
    return value


def _validated(settings: Settings) -> Settings:
    positive = (
        "max_iterations",
        "error_budget",
        "block_timeout_s",
        "worker_memory_mb",
        "output_limit_chars",
        "max_live_environments",
        "lease_ttl_s",
        "request_timeout_s",
        "subquery_concurrency",
        "extension_time_budget_s",
        "workspace_quota_mb",
    )
    for name in positive:
        if getattr(settings, name) <= 0:
            raise ConfigError(f"setting {name} must be positive, got {getattr(settings, name)}")
    if settings.block_timeout_min_s > settings.block_timeout_max_s:
        raise ConfigError("block_timeout_min_s must not exceed block_timeout_max_s")
    if settings.max_retries < 0 or settings.worker_pool_size < 0:
        raise ConfigError("max_retries and worker_pool_size must not be negative")
    return settings
