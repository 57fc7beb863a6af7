"""The channels' sections: each setting from ``COVE_*`` and from its TOML table, bad values
named with their source, and secrets never shown."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cove.config import Settings
from cove.errors import ConfigError

# (section, field, environment variable, its text, the value it gives)
CHANNEL_SETTINGS: list[tuple[str, str, str, str, Any]] = [
    ("web", "token", "COVE_WEB_TOKEN", "a-web-token-of-24-chars", "a-web-token-of-24-chars"),
    ("web", "upload_limit_bytes", "COVE_WEB_UPLOAD_LIMIT_BYTES", "1000", 1000),
    ("telegram", "token", "COVE_TELEGRAM_TOKEN", "1:bot-token", "1:bot-token"),
    (
        "telegram",
        "api_url",
        "COVE_TELEGRAM_API_URL",
        "http://127.0.0.1:8081",
        "http://127.0.0.1:8081",
    ),
    ("telegram", "allow", "COVE_TELEGRAM_ALLOW", "@ann, 42", ("@ann", "42")),
    ("telegram", "webhook_url", "COVE_TELEGRAM_WEBHOOK_URL", "https://x.org/h", "https://x.org/h"),
    ("telegram", "webhook_host", "COVE_TELEGRAM_WEBHOOK_HOST", "0.0.0.0", "0.0.0.0"),
    ("telegram", "webhook_port", "COVE_TELEGRAM_WEBHOOK_PORT", "9000", 9000),
    ("telegram", "webhook_secret", "COVE_TELEGRAM_WEBHOOK_SECRET", "abc_DEF-1", "abc_DEF-1"),
    ("telegram", "poll_timeout_s", "COVE_TELEGRAM_POLL_TIMEOUT_S", "2.5", 2.5),
    ("telegram", "rate_per_s", "COVE_TELEGRAM_RATE_PER_S", "5", 5.0),
    ("telegram", "group_rate_per_min", "COVE_TELEGRAM_GROUP_RATE_PER_MIN", "10", 10.0),
    ("telegram", "edit_interval_s", "COVE_TELEGRAM_EDIT_INTERVAL_S", "0.5", 0.5),
    ("telegram", "group_edit_interval_s", "COVE_TELEGRAM_GROUP_EDIT_INTERVAL_S", "4", 4.0),
    ("telegram", "max_file_bytes", "COVE_TELEGRAM_MAX_FILE_BYTES", "1000", 1000),
    ("serve", "shutdown_grace_s", "COVE_SHUTDOWN_GRACE_S", "5", 5.0),
    ("serve", "processes", "COVE_SERVE_PROCESSES", "3", 3),
    ("tui", "figure_viewer", "COVE_FIGURE_VIEWER", "xdg-open", "xdg-open"),
]
SECRETS = {
    "OPENAI_API_KEY": "sk-secret-api-key-1",
    "COVE_WEB_TOKEN": "secret-web-token-22222",
    "TELEGRAM_BOT_TOKEN": "3333:secret-bot-token",
    "COVE_TELEGRAM_WEBHOOK_SECRET": "secret-webhook-4444",
}


def toml_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "cove.toml"
    path.write_text(text, encoding="utf-8")
    return path


def value_of(settings: Settings, section: str, name: str) -> Any:
    return getattr(getattr(settings, section), name)


@pytest.mark.parametrize(("section", "name", "variable", "text", "value"), CHANNEL_SETTINGS)
def test_each_channel_setting_comes_from_its_environment_variable(
    tmp_path: Path, section: str, name: str, variable: str, text: str, value: Any
) -> None:
    settings = Settings.load(env={variable: text}, data_dir=tmp_path)
    assert value_of(settings, section, name) == value
    assert value_of(Settings.load(env={}, data_dir=tmp_path), section, name) != value


@pytest.mark.parametrize(("section", "name", "variable", "text", "value"), CHANNEL_SETTINGS)
def test_each_channel_setting_comes_from_its_toml_table_and_older_flat_names(
    tmp_path: Path, section: str, name: str, variable: str, text: str, value: Any
) -> None:
    literal = json.dumps(list(value) if isinstance(value, tuple) else value)
    tabled = toml_file(tmp_path, f"[{section}]\n{name} = {literal}\n")
    assert value_of(Settings.load(env={}, toml_path=tabled), section, name) == value
    flat = variable.removeprefix("COVE_").lower()
    for older in (f"{flat} = {literal}\n", f"[channels]\n{flat} = {literal}\n"):
        path = toml_file(tmp_path, older)
        assert value_of(Settings.load(env={}, toml_path=path), section, name) == value


def test_the_environment_outranks_the_file_and_a_cove_name_its_alias(tmp_path: Path) -> None:
    path = toml_file(tmp_path, "[telegram]\nrate_per_s = 3\ntoken = 'from-file'\n")
    env = {"COVE_TELEGRAM_RATE_PER_S": "4", "TELEGRAM_BOT_TOKEN": "from-alias"}
    settings = Settings.load(env=env, toml_path=path)
    assert (settings.telegram.rate_per_s, settings.telegram.token) == (4.0, "from-alias")
    env["COVE_TELEGRAM_TOKEN"] = "from-cove-name"
    assert Settings.load(env=env, toml_path=path).telegram.token == "from-cove-name"


@pytest.mark.parametrize(
    ("env", "toml", "message"),
    [
        (
            {"COVE_TELEGRAM_RATE_PER_S": "fast"},
            None,
            "setting telegram_rate_per_s expects float, got 'fast' "
            "(environment variable COVE_TELEGRAM_RATE_PER_S)",
        ),
        (
            {"COVE_TELEGRAM_POLL_TIMEOUT_S": "0"},
            None,
            "setting telegram_poll_timeout_s must be positive, got 0.0 "
            "(environment variable COVE_TELEGRAM_POLL_TIMEOUT_S)",
        ),
        (
            {"COVE_MAX_ITERATIONS": "many"},
            None,
            "setting max_iterations expects int, got 'many' "
            "(environment variable COVE_MAX_ITERATIONS)",
        ),
        (
            {},
            "[telegram]\nwebhook_port = 70000\n",
            "setting telegram_webhook_port must be 0 to 65535, got 70000 "
            "(config file {path}, [telegram] webhook_port)",
        ),
        (
            {},
            "[telegram]\nallow = ['@ann', 'bob']\n",
            "setting telegram_allow entry 'bob' is neither a Telegram user or chat id (an "
            "integer) nor an @username (config file {path}, [telegram] allow)",
        ),
        (
            {},
            "telegram_edit_interval_s = -1\n",
            "setting telegram_edit_interval_s must not be negative, got -1.0 (config file {path})",
        ),
        (
            {},
            "[channels]\nweb_upload_limit_bytes = 'lots'\n",
            "setting web_upload_limit_bytes expects int | None, got 'lots' "
            "(config file {path}, [channels] web_upload_limit_bytes)",
        ),
        (
            {},
            "[web]\nupload_limit_bytes = 0\n",
            "setting web_upload_limit_bytes must be positive, got 0 "
            "(config file {path}, [web] upload_limit_bytes)",
        ),
        ({}, "[telegram]\nrate = 5\n", "unknown setting(s): telegram.rate"),
        ({}, "[web]\nweb_token = 'x'\n", "unknown setting(s): web.web_token"),
        (
            {},
            "[serve]\nshutdown_grace_s = 1\n[channels]\nshutdown_grace_s = 2\n",
            "setting shutdown_grace_s is given twice",
        ),
    ],
)
def test_a_bad_value_names_the_setting_and_where_it_came_from(
    tmp_path: Path, env: dict[str, str], toml: str | None, message: str
) -> None:
    path = toml_file(tmp_path, toml) if toml is not None else None
    with pytest.raises(ConfigError) as caught:
        Settings.load(env=env, toml_path=path, data_dir=tmp_path)
    assert message.format(path=path) in str(caught.value)


def test_secrets_never_show_in_the_settings_or_their_errors(tmp_path: Path) -> None:
    settings = Settings.load(env=SECRETS, data_dir=tmp_path)
    assert settings.web.token == SECRETS["COVE_WEB_TOKEN"]
    assert settings.telegram.webhook_secret == SECRETS["COVE_TELEGRAM_WEBHOOK_SECRET"]
    shown = repr(settings) + str(settings) + repr(settings.web) + repr(settings.telegram)
    assert not [name for name, secret in SECRETS.items() if secret in shown]
    bad = {
        "[web]\ntoken = 123456789012345678\n": "123456789012345678",
        "[web]\ntoken = 'short-secret'\n": "short-secret",
        "[telegram]\ntoken = 98765432109\n": "98765432109",
        "[telegram]\nwebhook_secret = 'not allowed: spaces'\n": "not allowed: spaces",
    }
    for text, secret in bad.items():
        with pytest.raises(ConfigError) as caught:
            Settings.load(env={}, toml_path=toml_file(tmp_path, text))
        assert "setting " in str(caught.value) and secret not in str(caught.value)
