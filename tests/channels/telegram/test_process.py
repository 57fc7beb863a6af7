"""The bot next to other processes: ``cove run -c`` on the same conversation (the lease), and
``cove telegram`` itself as a process (its token never shows or is stored)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from cove.config import Settings
from tests.channels.cli.helpers import wait_for_requests
from tests.channels.telegram.conftest import ALLOWED, BotFactory
from tests.conftest import FAKE_API_KEY
from tests.fakes.openai_server import FakeOpenAI, Fault
from tests.fakes.telegram_server import FakeTelegram
from tests.scripted import GatedModel, reply

pytestmark = pytest.mark.slow  # cove telegram and cove processes


def cove_env(tmp_path: Path, server: FakeOpenAI, **extra: str) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "COVE_DATA_DIR": str(tmp_path),
        "COVE_SANDBOX_LIBRARIES": "0",
        "OPENAI_BASE_URL": server.base_url,
        "OPENAI_API_KEY": FAKE_API_KEY,
        "COVE_MODEL": "fake-model",
        "COVE_REQUEST_TIMEOUT_S": "30",
        "COVE_WORKER_POOL_SIZE": "1",
        **extra,
    }


async def cove(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "cove", *args]
    return await asyncio.to_thread(
        subprocess.run, command, env=env, capture_output=True, text=True, timeout=60
    )


def files_holding(root: Path, data: bytes) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and data in p.read_bytes()]


def has_text(tg: FakeTelegram, chat: int, fragment: str) -> bool:
    return any(fragment in text for text in tg.texts(chat))


async def test_cove_run_on_the_bots_running_conversation_is_busy_and_nothing_is_lost(
    bot: BotFactory, tg: FakeTelegram, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    # The bot's model is held at its second reply, so its turn runs while `cove run` tries.
    model = GatedModel([reply(["a = 1"], "first"), reply(["b = 2"], "slow")])
    fake_openai.add_replies(reply(["c = 3"], "from the terminal"))
    async with bot(model.factory()) as b:
        tg.send_text(ALLOWED, "start")
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "first"))
        [conv] = await b.convs.list()
        tg.send_text(ALLOWED, "a slow one")
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "iteration 1/"))  # the turn runs
        env = cove_env(tmp_path, fake_openai)
        refused = await cove(env, "run", "-c", conv.id, "me too")
        assert refused.returncode == 6, refused.stderr
        assert "busy" in refused.stderr and "Traceback" not in refused.stderr
        model.gate.set()
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "slow"))
        after = await cove(env, "run", "-c", conv.id, "now me")  # the lease is free again
        assert after.returncode == 0, after.stderr
        assert after.stdout.strip() == "from the terminal"
        turns = (await b.convs.inspect(conv.id)).turns
        assert [(t.request, t.status) for t in turns] == [
            ("start", "done"),
            ("a slow one", "done"),
            ("now me", "done"),
        ]
        assert set(await b.convs.variables(conv.id)) == {"a", "b", "c"}


async def test_a_message_while_cove_run_holds_the_conversation_waits_and_cancel_stops_both(
    bot: BotFactory,
    tg: FakeTelegram,
    fake_openai: FakeOpenAI,
    openai_settings: Settings,
    tmp_path: Path,
) -> None:
    fake_openai.add_replies(reply(["a = 1"], "first"))
    async with bot(None, settings=openai_settings) as b:
        tg.send_text(ALLOWED, "start")
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "first"))
        [conv] = await b.convs.list()
        fake_openai.add_faults(Fault.stall(8.0))
        # The stalled request may still take a reply when its stall ends: both are the same.
        fake_openai.add_replies(reply(["m = 2"], "bot again"), reply(["m = 2"], "bot again"))
        env = cove_env(tmp_path, fake_openai)
        terminal = asyncio.create_task(cove(env, "run", "-c", conv.id, "from the terminal"))
        await asyncio.to_thread(wait_for_requests, fake_openai, 2)
        tg.send_text(ALLOWED, "meanwhile")  # waits for the other process's turn, told once
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "runs next"))
        tg.send_text(ALLOWED, "/cancel")  # withdraws it, and reaches the process running the turn
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "Stopping the turn another cove process"))
        assert has_text(tg, ALLOWED, "1 queued message")
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "⏹ Cancelled."))
        done = await terminal
        assert done.returncode == 5, done.stderr  # `cove run`: the turn was cancelled
        assert done.stdout == ""  # no answer: it was stopped at the model
        tg.send_text(ALLOWED, "now")
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "bot again"))
        turns = (await b.convs.inspect(conv.id)).turns
        assert [(t.request, t.status) for t in turns] == [
            ("start", "done"),
            ("from the terminal", "cancelled"),
            ("now", "done"),
        ]
        tg.send_text(ALLOWED, "/cancel")
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "Nothing is running."))


async def test_cove_telegram_runs_as_a_process_and_never_shows_or_stores_its_token(
    tg: FakeTelegram, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.add_replies(reply(["x = 2 + 2"], "It is {{x}}."))
    env = cove_env(
        tmp_path,
        fake_openai,
        TELEGRAM_BOT_TOKEN=tg.token,
        COVE_TELEGRAM_API_URL=tg.api_url,
        COVE_TELEGRAM_ALLOW=str(ALLOWED),
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "cove",
        "telegram",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        await tg.wait_for(lambda: tg.calls_of("getUpdates"))
        tg.send_text(ALLOWED, "what is 2 + 2?")
        tg.send_text(777, "let me in")
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "It is 4."))
        await tg.wait_for(lambda: tg.calls_of("sendMessage", 777))
    finally:
        proc.send_signal(signal.SIGTERM)
        raw_out, raw_err = await asyncio.wait_for(proc.communicate(), 60)
    out, err = raw_out.decode(), raw_err.decode()
    assert proc.returncode == 0, err
    assert "running (long polling)" in err and "refused an update from user 777" in err
    secret = tg.token.split(":")[1]
    assert secret not in out + err
    assert await asyncio.to_thread(files_holding, tmp_path, secret.encode()) == []


async def test_a_wrong_token_is_a_clear_error_without_the_token(
    tg: FakeTelegram, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    wrong = "987654:WrongTokenThatMustNotBeShown"
    env = cove_env(
        tmp_path, fake_openai, TELEGRAM_BOT_TOKEN=wrong, COVE_TELEGRAM_API_URL=tg.api_url
    )
    result = await cove(env, "telegram")
    assert result.returncode == 2, result.stderr
    assert "refused the bot token" in result.stderr
    assert "WrongToken" not in result.stdout + result.stderr
    missing = await cove({k: v for k, v in env.items() if k != "TELEGRAM_BOT_TOKEN"}, "telegram")
    assert missing.returncode == 2 and "TELEGRAM_BOT_TOKEN" in missing.stderr
