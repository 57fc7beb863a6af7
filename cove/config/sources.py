"""Reading settings from the environment and from a TOML file, as flat keys.

Environment: ``COVE_<FLAT KEY>`` for every setting but ``prices``, plus the aliases ``COVE_DB``,
``OPENAI_BASE_URL`` and ``OPENAI_API_KEY``. TOML: one table per section (``[model]``,
``[loop]``, ``[sandbox]``, ``[store]``, ``[channels]``); flat keys at the top level are accepted
too, as older files have them. Unknown TOML keys are refused; unknown ``COVE_*`` variables are
listed by ``unknown_env_vars``.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cove.config.keys import KEYS, SECTIONS, key_in_section
from cove.config.sections import Price
from cove.errors import ConfigError

ENV_ALIASES = {
    "COVE_DB": "db_path",
    "OPENAI_BASE_URL": "base_url",
    "OPENAI_API_KEY": "api_key",
}
NOT_FROM_ENV = frozenset({"prices"})
# COVE_* names read elsewhere: the config file's path, the web login token, a TUI test switch.
OTHER_ENV = frozenset({"COVE_CONFIG", "COVE_WEB_TOKEN", "COVE_TUI_SCRIPTED_REPLIES"})


def env_name(flat: str) -> str:
    """The environment variable of a flat key (``max_iterations`` -> ``COVE_MAX_ITERATIONS``)."""
    return f"COVE_{flat.upper()}"


ENV_NAMES = {env_name(flat): flat for flat in KEYS if flat not in NOT_FROM_ENV}


def from_env(env: Mapping[str, str]) -> dict[str, str]:
    """The settings ``env`` gives, as flat key -> text."""
    values: dict[str, str] = {}
    for name, raw in env.items():
        flat = ENV_ALIASES.get(name) or ENV_NAMES.get(name)
        if flat is not None:
            values[flat] = raw
    return values


def unknown_env_vars(env: Mapping[str, str]) -> list[str]:
    """The ``COVE_*`` names in ``env`` that match no setting (typos, retired names), sorted."""
    known = ENV_NAMES.keys() | ENV_ALIASES.keys() | OTHER_ENV
    return sorted(name for name in env if name.startswith("COVE_") and name not in known)


def read_toml(path: Path) -> dict[str, Any]:
    """The settings of a TOML file as flat key -> value.

    Raises:
        ConfigError: The file cannot be read or parsed, names an unknown setting, gives one
            setting twice, or has a malformed ``prices`` table.
    """
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from exc
    values: dict[str, Any] = {}
    unknown: list[str] = []
    for name, value in data.items():
        if name in SECTIONS and isinstance(value, dict):
            for inner, item in value.items():
                key = key_in_section(name, inner)
                if key is None:
                    unknown.append(f"{name}.{inner}")
                else:
                    _put(values, key.flat, item, path)
        elif name in KEYS:
            _put(values, name, value, path)
        else:
            unknown.append(name)
    if unknown:
        raise ConfigError(f"{path}: unknown setting(s): {', '.join(unknown)}")
    if "prices" in values:
        values["prices"] = _prices(path, values["prices"])
    return values


def _put(values: dict[str, Any], flat: str, value: Any, path: Path) -> None:
    if flat in values:
        raise ConfigError(f"{path}: setting {flat} is given twice (at the top and in its table)")
    values[flat] = value


def _prices(path: Path, table: Any) -> dict[str, Price]:
    try:
        return {name: Price(float(p["input"]), float(p["output"])) for name, p in table.items()}
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise ConfigError(
            f"{path}: [prices] needs one table per model with numeric input and output "
            f"prices per million tokens ({exc!r})"
        ) from exc
