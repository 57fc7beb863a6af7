"""Settings: one frozen object built from defaults < TOML file < environment < overrides."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from cove.config import MEMORY_DB, Price, Settings, default_data_dir
from cove.errors import ConfigError


def write_toml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "cove.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_without_file_or_environment(tmp_path: Path) -> None:
    settings = Settings.load(env={"HOME": str(tmp_path)})
    assert settings.model == "gpt-4.1-mini"
    assert settings.max_iterations == 10
    assert settings.data_dir == tmp_path / ".local/share/cove"
    assert settings.database == str(tmp_path / ".local/share/cove/cove.db")
    assert settings.workspaces == tmp_path / ".local/share/cove/workspaces"


def test_data_dir_defaults_under_xdg_data_home(tmp_path: Path) -> None:
    env = {"HOME": "/nowhere", "XDG_DATA_HOME": str(tmp_path / "xdg")}
    assert default_data_dir(env) == tmp_path / "xdg/cove"
    assert Settings.load(env=env).database == str(tmp_path / "xdg/cove/cove.db")


def test_precedence_defaults_toml_environment_overrides(tmp_path: Path) -> None:
    toml = write_toml(tmp_path, 'model = "from-toml"\nmax_iterations = 7\nerror_budget = 3\n')
    env = {"HOME": str(tmp_path), "COVE_MODEL": "from-env", "COVE_MAX_ITERATIONS": "8"}

    from_toml = Settings.load(env={"HOME": str(tmp_path)}, toml_path=toml)
    assert (from_toml.model, from_toml.max_iterations, from_toml.error_budget) == (
        "from-toml",
        7,
        3,
    )

    from_env = Settings.load(env=env, toml_path=toml)
    assert (from_env.model, from_env.max_iterations, from_env.error_budget) == ("from-env", 8, 3)

    overridden = Settings.load(env=env, toml_path=toml, model="from-flag", max_iterations=None)
    assert (overridden.model, overridden.max_iterations) == ("from-flag", 8)  # None = not given


def test_cove_db_and_the_db_flag(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "COVE_DB": str(tmp_path / "env.db")}
    assert Settings.load(env=env).database == str(tmp_path / "env.db")
    assert Settings.load(env=env, db_path=MEMORY_DB).database == MEMORY_DB


def test_config_file_found_through_cove_config_or_the_data_dir(tmp_path: Path) -> None:
    explicit = write_toml(tmp_path, "max_restarts = 1\n")
    assert Settings.load(env={"HOME": "/x", "COVE_CONFIG": str(explicit)}).max_restarts == 1
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / "config.toml").write_text("max_restarts = 0\n", encoding="utf-8")
    assert Settings.load(env={"COVE_DATA_DIR": str(data_dir)}).max_restarts == 0


def test_environment_data_dir_outranks_the_toml_file(tmp_path: Path) -> None:
    toml = write_toml(tmp_path, f'data_dir = "{tmp_path / "toml"}"\n')
    settings = Settings.load(env={"COVE_DATA_DIR": str(tmp_path / "env")}, toml_path=toml)
    assert settings.data_dir == tmp_path / "env"
    assert Settings.load(env={"HOME": "/x"}, toml_path=toml).data_dir == tmp_path / "toml"


def test_environment_values_are_parsed_by_field_type(tmp_path: Path) -> None:
    settings = Settings.load(
        env={
            "HOME": str(tmp_path),
            "COVE_BLOCK_TIMEOUT_S": "2.5",
            "COVE_REASONING_EFFORT": "yes",
            "OPENAI_BASE_URL": "http://localhost:9/v1",
            "COVE_UNRELATED_THING": "ignored",
        }
    )
    assert settings.block_timeout_s == 2.5
    assert settings.reasoning_effort is True
    assert settings.base_url == "http://localhost:9/v1"


def test_prices_come_from_the_toml_file(tmp_path: Path) -> None:
    toml = write_toml(tmp_path, '[prices."my-model"]\ninput = 1\noutput = 2.5\n')
    settings = Settings.load(env={"HOME": str(tmp_path)}, toml_path=toml)
    assert settings.price_of("my-model") == Price(1.0, 2.5)
    assert settings.price_of("unknown-model") is None


@pytest.mark.parametrize(
    ("env", "toml", "overrides", "message"),
    [
        ({"COVE_MAX_ITERATIONS": "many"}, None, {}, "max_iterations expects int"),
        ({"COVE_REASONING_EFFORT": "maybe"}, None, {}, "reasoning_effort expects bool"),
        ({"COVE_BLOCK_TIMEOUT_S": "soon"}, None, {}, "block_timeout_s expects float"),
        ({}, "max_iterations = 0\n", {}, "max_iterations must be positive"),
        ({}, 'max_iterations = "ten"\n', {}, "max_iterations expects int"),
        ({}, "max_iterations = [1]\n", {}, "max_iterations expects int"),
        ({}, "max_iterations = true\n", {}, "max_iterations expects int"),
        ({}, "model = 4\n", {}, "model expects str"),
        ({}, "no_such_setting = 1\n", {}, "unknown setting(s): no_such_setting"),
        ({}, "this is not toml", {}, "cannot read config file"),
        ({}, '[prices."m"]\ninput = 1\n', {}, "[prices] needs"),
        ({}, "prices = 3\n", {}, "[prices] needs"),
        ({}, None, {"lease_ttl_s": -1.0}, "lease_ttl_s must be positive"),
        ({}, None, {"max_retries": -1}, "must not be negative"),
        ({}, None, {"block_timeout_min_s": 50.0, "block_timeout_max_s": 5.0}, "must not exceed"),
        ({}, None, {"worker_memory_mb": "lots"}, "worker_memory_mb expects int"),
        ({}, None, {"model_name": "x"}, "unknown setting(s): model_name"),
        ({"COVE_CONFIG": "/no/such/file.toml"}, None, {}, "cannot read config file"),
    ],
)
def test_bad_values_raise_config_error(
    tmp_path: Path,
    env: dict[str, str],
    toml: str | None,
    overrides: dict[str, object],
    message: str,
) -> None:
    toml_path = write_toml(tmp_path, toml) if toml is not None else None
    with pytest.raises(ConfigError) as caught:
        Settings.load(env={"HOME": str(tmp_path), **env}, toml_path=toml_path, **overrides)
    assert message in str(caught.value)


def test_api_key_is_hidden_from_repr(tmp_path: Path) -> None:
    settings = Settings.load(env={"HOME": str(tmp_path), "OPENAI_API_KEY": "sk-secret-123"})
    assert settings.api_key == "sk-secret-123"
    assert "sk-secret-123" not in repr(settings)
    assert "sk-secret-123" not in str(settings)


def test_settings_are_frozen_and_replace_validates(tmp_path: Path) -> None:
    settings = Settings.load(env={"HOME": str(tmp_path)})
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.model = "other"  # type: ignore[misc]
    assert settings.replace(max_iterations=3).max_iterations == 3
    assert settings.max_iterations == 10
    with pytest.raises(ConfigError, match="must be positive"):
        settings.replace(max_iterations=0)
    with pytest.raises(ConfigError, match="unknown setting"):
        settings.replace(max_iteration=3)
    with pytest.raises(ConfigError, match="expects int"):
        settings.replace(max_iterations=2.5)


def test_loading_reads_no_process_environment_when_given_a_mapping(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COVE_MODEL", "leaked")
    assert Settings.load(env={"HOME": str(tmp_path)}).model == "gpt-4.1-mini"
