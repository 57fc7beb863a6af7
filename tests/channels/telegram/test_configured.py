"""The bot runs as ``settings.telegram`` says, from the environment or from a config file."""

from __future__ import annotations

import socket
from pathlib import Path

import httpx

from cove.config import Settings
from tests.channels.telegram.conftest import ALLOWED, OTHER, BotFactory
from tests.fakes.telegram_server import FakeTelegram


def has_text(tg: FakeTelegram, chat: int, fragment: str) -> bool:
    return any(fragment in text for text in tg.texts(chat))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


async def test_settings_from_the_environment_reach_the_running_bot(
    bot: BotFactory, tg: FakeTelegram, tmp_path: Path
) -> None:
    env = {
        "TELEGRAM_BOT_TOKEN": tg.token,
        "COVE_TELEGRAM_API_URL": f"{tg.api_url}/bot",
        "COVE_TELEGRAM_ALLOW": str(ALLOWED),
        "COVE_TELEGRAM_POLL_TIMEOUT_S": "2",
        "COVE_TELEGRAM_MAX_FILE_BYTES": "1000",
        "COVE_TELEGRAM_RATE_PER_S": "500",
        "COVE_TELEGRAM_GROUP_RATE_PER_MIN": "6000",
        "COVE_TELEGRAM_EDIT_INTERVAL_S": "0.05",
        "COVE_TELEGRAM_GROUP_EDIT_INTERVAL_S": "0.05",
    }
    telegram = Settings.load(env=env, data_dir=tmp_path).telegram
    async with bot([{"thinking": "", "answer": "configured"}], telegram=telegram) as b:
        assert b.channel.settings is telegram
        await tg.wait_for(lambda: tg.calls_of("getUpdates"))
        assert {call.params.get("timeout") for call in tg.calls_of("getUpdates")} == {2}
        tg.send_document(ALLOWED, b"x" * 2000, "big.bin")
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "over the"))
        assert not tg.calls_of("getFile")
        tg.send_text(OTHER, "and me?")  # on the fixture's list, not on this one
        await tg.wait_for(lambda: tg.calls_of("sendMessage", OTHER))
        assert "only talks to the people it was set up for" in tg.texts(OTHER)[0]
        tg.send_text(ALLOWED, "hello")
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "configured"))


async def test_webhook_settings_from_the_config_file_reach_the_running_bot(
    bot: BotFactory, tg: FakeTelegram, tmp_path: Path
) -> None:
    port = free_port()
    toml = tmp_path / "cove.toml"
    toml.write_text(
        f'[telegram]\ntoken = "{tg.token}"\napi_url = "{tg.api_url}"\nallow = ["{ALLOWED}"]\n'
        'webhook_url = "https://bot.example.org/tg/hook"\nwebhook_host = "127.0.0.1"\n'
        f'webhook_port = {port}\nwebhook_secret = "secret-from-the-file"\n',
        encoding="utf-8",
    )
    telegram = Settings.load(env={}, toml_path=toml, data_dir=tmp_path).telegram
    async with bot([{"thinking": "", "answer": "through the hook"}], telegram=telegram) as b:
        assert tg.webhook is not None
        assert tg.webhook["url"] == "https://bot.example.org/tg/hook"
        assert tg.webhook["secret_token"] == "secret-from-the-file"
        assert b.channel.webhook_port == port and not tg.calls_of("getUpdates")
        update = tg.text_update(ALLOWED, "hi")
        async with httpx.AsyncClient() as client:
            headers = {"X-Telegram-Bot-Api-Secret-Token": "secret-from-the-file"}
            posted = await client.post(
                f"http://127.0.0.1:{port}/tg/hook", json=update, headers=headers
            )
        assert posted.status_code == 200
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "through the hook"))
