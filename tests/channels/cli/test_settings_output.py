"""What the commands show of the settings: a bad value named with its source, secrets never."""

from __future__ import annotations

from pathlib import Path

from tests.channels.cli.helpers import Cove
from tests.fakes.openai_server import FakeOpenAI

SECRETS = {
    "COVE_WEB_TOKEN": "secret-web-token-22222",
    "TELEGRAM_BOT_TOKEN": "3333:secret-bot-token",
    "COVE_TELEGRAM_WEBHOOK_SECRET": "secret-webhook-4444",
}


def shown(result: object) -> str:
    return getattr(result, "stdout", "") + getattr(result, "stderr", "")


def test_the_channels_secrets_never_show_in_what_a_command_prints(
    cli: Cove, server: FakeOpenAI
) -> None:
    cli.env |= SECRETS
    for args in (("doctor",), ("list",), ("telegram", "--help"), ("web", "--help")):
        result = cli(*args)
        assert result.exit_code == 0, shown(result)
        assert not [name for name, secret in SECRETS.items() if secret in shown(result)], args


def test_a_bad_channel_setting_is_one_clear_line_naming_its_source(
    cli: Cove, server: FakeOpenAI, tmp_path: Path
) -> None:
    cli.env["COVE_WEB_TOKEN"] = "short-secret"
    result = cli("list")
    assert result.exit_code == 2
    assert result.stderr == (
        "cove: setting web_token must be at least 16 characters "
        "(environment variable COVE_WEB_TOKEN)\n"
    )
    del cli.env["COVE_WEB_TOKEN"]
    config = tmp_path / "cove.toml"
    config.write_text("[telegram]\nrate_per_s = 'fast'\n", encoding="utf-8")
    cli.env["COVE_CONFIG"] = str(config)
    result = cli("list")
    assert result.exit_code == 2
    assert result.stderr == (
        "cove: setting telegram_rate_per_s expects float, got 'fast' "
        f"(config file {config}, [telegram] rate_per_s)\n"
    )
