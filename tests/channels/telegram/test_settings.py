"""The bot's settings: token, Bot API address and allow-list, from the environment and flags."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from telegram import Update

from cove.channels.telegram.roster import is_allowed
from cove.channels.telegram.secret import bot_token
from cove.config import Settings
from cove.errors import ConfigError

TOKEN = "42:SecretPartThatMustNotShow"


def settings(tmp_path: Path, env: dict[str, str], **flat: object) -> Settings:
    return Settings.load(env=env, data_dir=tmp_path, **flat)


def test_the_bot_is_configured_by_its_settings_and_the_token_by_the_environment(
    tmp_path: Path,
) -> None:
    env = {
        "TELEGRAM_BOT_TOKEN": TOKEN,
        "COVE_TELEGRAM_API_URL": "http://127.0.0.1:8081/bot",
        "COVE_TELEGRAM_ALLOW": "@Ann, 42, -100500",
    }
    s = settings(tmp_path, env)
    telegram = s.telegram
    assert bot_token(telegram).reveal() == TOKEN
    assert telegram.api_root == "http://127.0.0.1:8081"
    assert telegram.allowed() == ({42, -100500}, {"ann"})
    assert telegram.webhook_url is None
    assert "SecretPart" not in repr(s) and "SecretPart" not in str(bot_token(telegram))
    from_settings = settings(tmp_path, {"COVE_TELEGRAM_TOKEN": "from-settings"})
    assert bot_token(from_settings.telegram).reveal() == "from-settings"
    both = settings(tmp_path, {"TELEGRAM_BOT_TOKEN": TOKEN, "COVE_TELEGRAM_TOKEN": "cove-own"})
    assert bot_token(both.telegram).reveal() == "cove-own"  # a COVE_* name outranks its alias


def test_flags_override_the_settings(tmp_path: Path) -> None:
    telegram = settings(
        tmp_path,
        {"TELEGRAM_BOT_TOKEN": TOKEN, "COVE_TELEGRAM_ALLOW": "1"},
        telegram_api_url="https://tg.example.org/",
        telegram_allow="7, 8",
        telegram_webhook_url="https://bot.example.org/hook",
    ).telegram
    assert telegram.api_root == "https://tg.example.org" and telegram.allowed()[0] == {7, 8}
    assert telegram.webhook_url == "https://bot.example.org/hook"


@pytest.mark.parametrize(
    ("env", "flags", "message"),
    [
        ({"TELEGRAM_BOT_TOKEN": TOKEN}, {"telegram_allow": "12, bob"}, "'bob' is neither"),
        (
            {"TELEGRAM_BOT_TOKEN": TOKEN, "COVE_TELEGRAM_ALLOW": "12;bob"},
            {},
            "'bob' is neither a Telegram user or chat id (an integer) nor an @username "
            "(environment variable COVE_TELEGRAM_ALLOW)",
        ),
        ({"TELEGRAM_BOT_TOKEN": TOKEN}, {"telegram_api_url": "ftp://x"}, "telegram_api_url"),
        (
            {"TELEGRAM_BOT_TOKEN": TOKEN},
            {"telegram_webhook_url": "nowhere"},
            "telegram_webhook_url must be an http(s) URL",
        ),
    ],
)
def test_bad_settings_are_clear_errors_without_the_token(
    tmp_path: Path, env: dict[str, str], flags: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        settings(tmp_path, env, **flags)
    assert message in str(caught.value)
    assert "SecretPart" not in str(caught.value)


def test_no_token_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="TELEGRAM_BOT_TOKEN"):
        bot_token(settings(tmp_path, {}).telegram)


def test_importing_the_channel_leaves_the_environment_alone() -> None:
    code = (
        "import os\nbefore = dict(os.environ)\n"
        "import cove.channels.telegram, cove.channels.cli\n"
        "print(sorted(k for k in os.environ if before.get(k) != os.environ[k]))"
    )
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"  # python-telegram-bot's opt-in is set by the bot


def _update(user_id: int, username: str | None, chat_id: int) -> Update:
    sender = {"id": user_id, "is_bot": False, "first_name": "x"}
    if username:
        sender["username"] = username
    message = {
        "message_id": 1,
        "date": 0,
        "chat": {"id": chat_id, "type": "private"},
        "from": sender,
        "text": "hi",
    }
    return Update.de_json({"update_id": 1, "message": message}, None)


def test_the_allow_list_matches_user_ids_chat_ids_and_usernames() -> None:
    ids, names = frozenset({5, -100}), frozenset({"ann"})
    assert is_allowed(_update(5, None, 5), ids, names)
    assert is_allowed(_update(9, None, -100), ids, names)  # an allowed group
    assert is_allowed(_update(9, "Ann", 9), ids, names)
    assert not is_allowed(_update(9, "bob", 9), ids, names)
    assert not is_allowed(_update(9, None, 9), frozenset(), frozenset())
