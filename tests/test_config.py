"""Settings: one frozen object built from defaults < TOML file < environment < overrides."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from cove.config import (
    MEMORY_DB,
    ModelSettings,
    Price,
    SandboxSettings,
    Settings,
    default_data_dir,
    unknown_env_vars,
)
from cove.errors import ConfigError


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The default data directory (platformdirs reads the process's HOME) under ``tmp_path``."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    yield tmp_path


def write_toml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "cove.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_without_file_or_environment(tmp_path: Path) -> None:
    settings = Settings.load(env={"HOME": str(tmp_path)})
    assert settings.model.name == "gpt-4.1-mini"
    assert settings.loop.max_iterations == 10
    assert settings.store.data_dir == tmp_path / ".local/share/cove"
    assert settings.store.database == str(tmp_path / ".local/share/cove/cove.db")
    assert settings.store.workspaces == tmp_path / ".local/share/cove/workspaces"


def test_data_dir_defaults_under_xdg_data_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", "/nowhere")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_data_dir() == tmp_path / "xdg/cove"
    assert Settings.load(env={}).store.database == str(tmp_path / "xdg/cove/cove.db")


def test_precedence_defaults_toml_environment_overrides(tmp_path: Path) -> None:
    toml = write_toml(tmp_path, 'model = "from-toml"\nmax_iterations = 7\nerror_budget = 3\n')
    env = {"HOME": str(tmp_path), "COVE_MODEL": "from-env", "COVE_MAX_ITERATIONS": "8"}

    from_toml = Settings.load(env={"HOME": str(tmp_path)}, toml_path=toml)
    assert (from_toml.model.name, from_toml.loop.max_iterations, from_toml.loop.error_budget) == (
        "from-toml",
        7,
        3,
    )

    from_env = Settings.load(env=env, toml_path=toml)
    assert (from_env.model.name, from_env.loop.max_iterations, from_env.loop.error_budget) == (
        "from-env",
        8,
        3,
    )

    overridden = Settings.load(env=env, toml_path=toml, model="from-flag", max_iterations=None)
    assert (overridden.model.name, overridden.loop.max_iterations) == (
        "from-flag",
        8,
    )  # None = not given


def test_cove_db_and_the_db_flag(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "COVE_DB": str(tmp_path / "env.db")}
    assert Settings.load(env=env).store.database == str(tmp_path / "env.db")
    assert Settings.load(env=env, db_path=MEMORY_DB).store.database == MEMORY_DB


def test_config_file_found_through_cove_config_or_the_data_dir(tmp_path: Path) -> None:
    explicit = write_toml(tmp_path, "max_restarts = 1\n")
    assert Settings.load(env={"HOME": "/x", "COVE_CONFIG": str(explicit)}).loop.max_restarts == 1
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / "config.toml").write_text("max_restarts = 0\n", encoding="utf-8")
    assert Settings.load(env={"COVE_DATA_DIR": str(data_dir)}).loop.max_restarts == 0


def test_environment_data_dir_outranks_the_toml_file(tmp_path: Path) -> None:
    toml = write_toml(tmp_path, f'data_dir = "{tmp_path / "toml"}"\n')
    settings = Settings.load(env={"COVE_DATA_DIR": str(tmp_path / "env")}, toml_path=toml)
    assert settings.store.data_dir == tmp_path / "env"
    assert Settings.load(env={"HOME": "/x"}, toml_path=toml).store.data_dir == tmp_path / "toml"


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
    assert settings.sandbox.block_timeout_s == 2.5
    assert settings.model.reasoning_effort is True
    assert settings.model.base_url == "http://localhost:9/v1"


def test_prices_come_from_the_toml_file(tmp_path: Path) -> None:
    toml = write_toml(tmp_path, '[prices."my-model"]\ninput = 1\noutput = 2.5\n')
    settings = Settings.load(env={"HOME": str(tmp_path)}, toml_path=toml)
    assert settings.model.price_of("my-model") == Price(1.0, 2.5)
    assert settings.model.price_of("unknown-model") is None


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
    assert settings.model.api_key == "sk-secret-123"
    assert "sk-secret-123" not in repr(settings)
    assert "sk-secret-123" not in str(settings)
    assert "sk-secret-123" not in repr(settings.model)


def test_settings_are_frozen_and_replace_validates(tmp_path: Path) -> None:
    settings = Settings.load(env={"HOME": str(tmp_path)})
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.model = ModelSettings(name="other")  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.loop.max_iterations = 3  # type: ignore[misc]
    assert settings.replace(max_iterations=3).loop.max_iterations == 3
    assert settings.loop.max_iterations == 10
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
    assert Settings.load(env={"HOME": str(tmp_path)}).model.name == "gpt-4.1-mini"


def test_sections_group_the_settings_and_route_flat_keys() -> None:
    settings = Settings.load(env={}, max_iterations=3, model="m", worker_pool_size=0)
    assert settings.loop.max_iterations == 3
    assert settings.model.name == "m"
    assert settings.sandbox == SandboxSettings(worker_pool_size=0)
    assert settings.replace(lease_ttl_s=5).store.lease_ttl_s == 5.0
    assert settings.replace(shutdown_grace_s=1).serve.shutdown_grace_s == 1.0


def test_toml_tables_per_section_and_flat_keys_both_work(tmp_path: Path) -> None:
    toml = write_toml(
        tmp_path,
        'error_budget = 3\n[model]\nname = "tabled"\n[loop]\nmax_iterations = 4\n'
        '[model.prices."m"]\ninput = 1\noutput = 2\n'
        '[channels]\ntelegram_allow = ["@ann", "42"]\ntelegram_webhook_url = "https://x/hook"\n',
    )
    settings = Settings.load(env={}, toml_path=toml)
    assert (settings.model.name, settings.loop.max_iterations) == ("tabled", 4)
    assert settings.loop.error_budget == 3
    assert settings.model.price_of("m") == Price(1.0, 2.0)
    assert settings.telegram.allow == ("@ann", "42")
    assert settings.telegram.webhook_url == "https://x/hook"


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ("[loop]\nmax_iteration = 4\n", "unknown setting(s): loop.max_iteration"),
        ("[loop]\nblock_timeout_s = 4\n", "unknown setting(s): loop.block_timeout_s"),
        ("[nowhere]\nx = 1\n", "unknown setting(s): nowhere"),
        ("max_iterations = 3\n[loop]\nmax_iterations = 4\n", "max_iterations is given twice"),
        ("[model]\nname = 4\n", "model expects str"),
        ('[channels]\ntelegram_allow = "@ann"\n', ""),  # one name as text is read as a list
        ("[channels]\ntelegram_allow = [1]\n", "telegram_allow expects tuple[str, ...]"),
    ],
)
def test_toml_tables_are_checked_key_by_key(tmp_path: Path, toml: str, message: str) -> None:
    path = write_toml(tmp_path, toml)
    if not message:
        assert Settings.load(env={}, toml_path=path).telegram.allow == ("@ann",)
        return
    with pytest.raises(ConfigError) as caught:
        Settings.load(env={}, toml_path=path)
    assert message in str(caught.value)


def test_environment_reads_tuples_optionals_and_channel_settings() -> None:
    env = {
        "COVE_TELEGRAM_ALLOW": "@ann, 42,,",
        "COVE_TELEGRAM_API_URL": "http://127.0.0.1:8081/bot",
        "COVE_SHUTDOWN_GRACE_S": "2.5",
        "COVE_WEB_UPLOAD_LIMIT_BYTES": "1000",
        "COVE_TELEGRAM_TOKEN": "123:secret-token",
    }
    settings = Settings.load(env=env)
    assert settings.telegram.allow == ("@ann", "42")
    assert settings.telegram.api_url == "http://127.0.0.1:8081/bot"
    assert (settings.serve.shutdown_grace_s, settings.web.upload_limit_bytes) == (2.5, 1000)
    assert "secret-token" not in repr(settings)
    assert Settings.load(env={"COVE_WEB_UPLOAD_LIMIT_BYTES": ""}).web.upload_limit_bytes is None
    with pytest.raises(ConfigError, match=r"web_upload_limit_bytes expects int \| None"):
        Settings.load(env={"COVE_WEB_UPLOAD_LIMIT_BYTES": "big"})


def test_unknown_cove_variables_are_listed() -> None:
    env = {
        "COVE_MAX_ITERATONS": "3",
        "COVE_DB": "x.db",
        "COVE_MODEL": "m",
        "COVE_CONFIG": "c.toml",
        "COVE_WEB_TOKEN": "t" * 20,
        "COVE_TELEGRAM_ALLOW": "1",
        "COVE_PRICES": "cheap",
        "OPENAI_API_KEY": "k",
        "HOME": "/h",
    }
    assert unknown_env_vars(env) == ["COVE_MAX_ITERATONS", "COVE_PRICES"]
    typo = {"COVE_MAX_ITERATONS": "3"}
    assert Settings.load(env=typo).loop.max_iterations == 10  # listed, not applied


def test_workspaces_live_beside_their_database(tmp_path: Path) -> None:
    elsewhere = Settings.load(env={"COVE_DB": str(tmp_path / "proj/notes.db")})
    assert elsewhere.store.workspaces == tmp_path / "proj/notes.workspaces"
    default = Settings.load(env={})
    assert default.store.workspaces == default.store.data_dir / "workspaces"
    same = Settings.load(env={}, db_path=default.store.database)
    assert same.store.workspaces == default.store.data_dir / "workspaces"
    memory = Settings.load(env={}, db_path=MEMORY_DB)
    assert memory.store.workspaces == default.store.data_dir / "workspaces"
    chosen = Settings.load(env={"COVE_WORKSPACES_DIR": str(tmp_path / "ws")}, db_path="a.db")
    assert chosen.store.workspaces == tmp_path / "ws"


def test_an_override_data_dir_finds_its_config_file(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text("[loop]\nmax_restarts = 0\n", encoding="utf-8")
    assert Settings.load(env={}, data_dir=tmp_path).loop.max_restarts == 0
