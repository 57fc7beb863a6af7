"""Reading settings from the environment and from a TOML file, as flat keys with their source.

Environment: ``COVE_<FLAT KEY>`` for every setting but ``prices``, plus the aliases ``COVE_DB``,
``OPENAI_BASE_URL``, ``OPENAI_API_KEY`` and ``TELEGRAM_BOT_TOKEN`` (a ``COVE_*`` name outranks
its alias). TOML: one table per section (``[model]``, ``[loop]``, ``[sandbox]``, ``[store]``,
``[web]``, ``[telegram]``, ``[serve]``, ``[tui]``); flat keys at the top level, and the
channels' flat keys in one ``[channels]`` table, are accepted too, as older files have them.
Unknown TOML keys are refused; unknown ``COVE_*`` variables are listed by ``unknown_env_vars``.
Each value keeps where it came from, for the error a bad one gets.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cove.config.keys import KEYS, LEGACY_TABLES, SECTIONS, Key, key_in_section
from cove.config.sections import Endpoint, Price
from cove.errors import ConfigError

ENV_ALIASES = {
    "COVE_DB": "db_path",
    "OPENAI_BASE_URL": "base_url",
    "OPENAI_API_KEY": "api_key",
    "TELEGRAM_BOT_TOKEN": "telegram_token",
}
NOT_FROM_ENV = frozenset({"prices", "endpoints"})
# COVE_* names read elsewhere: the config file's path, a TUI test switch.
OTHER_ENV = frozenset({"COVE_CONFIG", "COVE_TUI_SCRIPTED_REPLIES"})


@dataclass(frozen=True)
class Given:
    """One setting's value and where it came from (None: handed over by the program)."""

    value: Any
    source: str | None = None


def env_name(flat: str) -> str:
    """The environment variable of a flat key (``max_iterations`` -> ``COVE_MAX_ITERATIONS``)."""
    return f"COVE_{flat.upper()}"


ENV_NAMES = {env_name(flat): flat for flat in KEYS if flat not in NOT_FROM_ENV}


def from_env(env: Mapping[str, str]) -> dict[str, Given]:
    """The settings ``env`` gives, as flat key -> text and the variable it came from."""
    values: dict[str, Given] = {}
    for names in (ENV_ALIASES, ENV_NAMES):  # the COVE_* names last: they outrank the aliases
        for name, flat in names.items():
            if name in env:
                values[flat] = Given(env[name], f"environment variable {name}")
    return values


def unknown_env_vars(env: Mapping[str, str]) -> list[str]:
    """The ``COVE_*`` names in ``env`` that match no setting (typos, retired names), sorted."""
    known = ENV_NAMES.keys() | ENV_ALIASES.keys() | OTHER_ENV
    return sorted(name for name in env if name.startswith("COVE_") and name not in known)


def read_toml(path: Path) -> dict[str, Given]:
    """The settings of a TOML file as flat key -> value and where in the file it is.

    Raises:
        ConfigError: The file cannot be read or parsed, names an unknown setting, gives one
            setting twice, or has a malformed ``prices`` or ``endpoints`` table.
    """
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from exc
    values: dict[str, Given] = {}
    unknown: list[str] = []
    for name, value in data.items():
        if (name in SECTIONS or name in LEGACY_TABLES) and isinstance(value, dict):
            for inner, item in value.items():
                key = _table_key(name, inner)
                if key is None:
                    unknown.append(f"{name}.{inner}")
                else:
                    _put(values, key.flat, Given(item, f"config file {path}, [{name}] {inner}"))
        elif name in KEYS:
            _put(values, name, Given(value, f"config file {path}"))
        else:
            unknown.append(name)
    if unknown:
        raise ConfigError(f"{path}: unknown setting(s): {', '.join(unknown)}")
    if "prices" in values:
        values["prices"] = Given(_prices(path, values["prices"].value), values["prices"].source)
    if "endpoints" in values:
        given = values["endpoints"]
        values["endpoints"] = Given(_endpoints(path, given.value), given.source)
    return values


def _table_key(table: str, name: str) -> Key | None:
    if table in SECTIONS:
        return key_in_section(table, name)
    key = KEYS.get(name)  # an older [channels] table: the channels' flat keys
    return key if key is not None and key.section in LEGACY_TABLES[table] else None


def _put(values: dict[str, Given], flat: str, given: Given) -> None:
    if flat in values:
        raise ConfigError(
            f"setting {flat} is given twice ({values[flat].source}; {given.source})",
            setting=flat,
        )
    values[flat] = given


def _prices(path: Path, table: Any) -> dict[str, Price]:
    try:
        return {name: Price(float(p["input"]), float(p["output"])) for name, p in table.items()}
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise ConfigError(
            f"{path}: [prices] needs one table per model with numeric input and output "
            f"prices per million tokens ({exc!r})"
        ) from exc


def _endpoints(path: Path, table: Any) -> dict[str, Endpoint]:
    """``[model.endpoints.NAME]`` tables: each a ``base_url`` and an ``api_key``."""
    endpoints: dict[str, Endpoint] = {}
    for name, entry in table.items() if isinstance(table, dict) else ():
        if not isinstance(entry, dict) or not set(entry) <= {"base_url", "api_key"}:
            break
        base_url, api_key = entry.get("base_url"), entry.get("api_key")
        if not all(v is None or isinstance(v, str) for v in (base_url, api_key)):
            break
        endpoints[name] = Endpoint(base_url, api_key)
    else:
        if isinstance(table, dict):
            return endpoints
    raise ConfigError(
        f"{path}: [model.endpoints] needs one table per model holding only base_url and api_key "
        "(text)",
        setting="endpoints",
    )
