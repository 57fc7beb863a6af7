"""The bot's options: token, Bot API address and allow-list, from settings and flags."""

from __future__ import annotations

from pathlib import Path

import pytest
from telegram import Update

from cove.channels.telegram.options import TelegramOptions
from cove.channels.telegram.roster import is_allowed
from cove.config import Settings
from cove.errors import ConfigError

TOKEN = "42:SecretPartThatMustNotShow"


def settings(tmp_path: Path, **flat: object) -> Settings:
    return Settings.load(env={}, data_dir=tmp_path, **flat)


def test_options_come_from_the_channel_settings_and_the_token_from_the_environment(
    tmp_path: Path,
) -> None:
    s = settings(
        tmp_path,
        telegram_api_url="http://127.0.0.1:8081/bot",
        telegram_allow=("@Ann", "42", "-100500"),
        telegram_token="from-settings",
    )
    options = TelegramOptions.load(s, {"TELEGRAM_BOT_TOKEN": TOKEN})
    assert options.token.reveal() == TOKEN
    assert options.base_url == "http://127.0.0.1:8081/bot"
    assert options.base_file_url == "http://127.0.0.1:8081/file/bot"
    assert options.allow == {42, -100500} and options.allow_usernames == {"ann"}
    assert options.webhook_url == ""
    assert "SecretPart" not in repr(options) and "SecretPart" not in str(options.token)
    assert TelegramOptions.load(s, {}).token.reveal() == "from-settings"


def test_flags_override_the_settings(tmp_path: Path) -> None:
    options = TelegramOptions.load(
        settings(tmp_path, telegram_allow=("1",)),
        {"TELEGRAM_BOT_TOKEN": TOKEN},
        api_url="https://tg.example.org/",
        allow="7, 8",
        webhook_url="https://bot.example.org/hook",
    )
    assert options.api_url == "https://tg.example.org" and options.allow == {7, 8}
    assert options.webhook_url == "https://bot.example.org/hook"


@pytest.mark.parametrize(
    ("env", "flags", "message"),
    [
        ({}, {}, "TELEGRAM_BOT_TOKEN"),
        ({"TELEGRAM_BOT_TOKEN": TOKEN}, {"allow": "12, bob"}, "'bob' is neither"),
        ({"TELEGRAM_BOT_TOKEN": TOKEN}, {"api_url": "ftp://x"}, "Bot API URL"),
        ({"TELEGRAM_BOT_TOKEN": TOKEN}, {"webhook_url": "nowhere"}, "webhook URL"),
    ],
)
def test_bad_options_are_clear_errors_without_the_token(
    tmp_path: Path, env: dict[str, str], flags: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        TelegramOptions.load(settings(tmp_path), env, **flags)
    assert "SecretPart" not in str(caught.value)


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
