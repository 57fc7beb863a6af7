"""The flat keys: every setting's one name across sections, and the section it belongs to."""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from typing import Any

from cove.config.channel_sections import ServeSettings, TelegramSettings, TuiSettings, WebSettings
from cove.config.checks import flat_key
from cove.config.extension_section import ExtensionSettings
from cove.config.sections import LoopSettings, ModelSettings, SandboxSettings, StoreSettings

SECTIONS: dict[str, type] = {
    "model": ModelSettings,
    "loop": LoopSettings,
    "sandbox": SandboxSettings,
    "store": StoreSettings,
    "web": WebSettings,
    "telegram": TelegramSettings,
    "serve": ServeSettings,
    "tui": TuiSettings,
    "extensions": ExtensionSettings,
}
#: Older TOML files have one ``[channels]`` table holding the channels' flat keys.
LEGACY_TABLES: dict[str, frozenset[str]] = {
    "channels": frozenset({"web", "telegram", "serve", "tui"}),
}


@dataclass(frozen=True)
class Key:
    """Where one flat key lives: its section, its field name there, its type, and whether its
    value is a secret (hidden from ``repr``, never quoted in an error)."""

    flat: str
    section: str
    field: str
    hint: Any
    secret: bool = False


def _keys() -> dict[str, Key]:
    keys: dict[str, Key] = {}
    for section, cls in SECTIONS.items():
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            flat = flat_key(cls, f.name)
            if flat in keys:
                raise RuntimeError(f"setting {flat} is defined twice")
            keys[flat] = Key(flat, section, f.name, hints[f.name], secret=not f.repr)
    return keys


KEYS: dict[str, Key] = _keys()


def key_in_section(section: str, name: str) -> Key | None:
    """The key of field ``name`` in ``section`` (as a TOML table names it), or None."""
    for key in KEYS.values():
        if key.section == section and key.field == name:
            return key
    return None
