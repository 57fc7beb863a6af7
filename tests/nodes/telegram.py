"""Two ``cove serve --web --telegram`` nodes on one PostgreSQL database, each with a webhook
server, and the fake Bot API both call: what one bot behind one webhook URL looks like when
any node may receive an update."""

from __future__ import annotations

import re
import socket
from pathlib import Path
from typing import Any

import httpx

from tests.channels.serve.process import ServeProcess
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram
from tests.nodes.cluster import node_env, on_host
from tests.scripted import reply

HOOK_PATH = "/telegram/hook"
SECRET = "one-secret-for-every-node"
MARK = re.compile(r"msg-\d+")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class BotNode:
    """A node running the bot; ``deliver`` posts an update to its webhook, as Telegram (through
    the proxy) would. ``host``: the node's own host name (``cluster.on_host``); ``args``: more
    arguments of ``cove serve``."""

    def __init__(
        self,
        tmp_path: Path,
        name: str,
        fake: FakeOpenAI,
        tg: FakeTelegram,
        url: str,
        allow: list[int],
        *,
        host: str | None = None,
        args: tuple[str, ...] = (),
        **extra: str,
    ) -> None:
        self.hook_port = free_port()
        env = node_env(tmp_path, name, fake, url, **extra) | {
            "TELEGRAM_BOT_TOKEN": tg.token,
            "COVE_TELEGRAM_API_URL": tg.api_url,
            "COVE_TELEGRAM_ALLOW": ",".join(str(chat) for chat in allow),
            "COVE_TELEGRAM_WEBHOOK_URL": f"https://bot.example.org{HOOK_PATH}",
            "COVE_TELEGRAM_WEBHOOK_PORT": str(self.hook_port),
            "COVE_TELEGRAM_WEBHOOK_SECRET": SECRET,
        }
        self.process = ServeProcess(env, "--web", "--telegram", *args, prefix=on_host(host))

    async def deliver(self, update: dict[str, Any]) -> None:
        """Post one update to this node's webhook; it must be taken (200)."""
        answer = await post_update(f"http://127.0.0.1:{self.hook_port}", update)
        assert answer.status_code == 200, answer.text

    def stop(self) -> None:
        self.process.stop()


async def post_update(base_url: str, update: dict[str, Any]) -> httpx.Response:
    """Post one update to the webhook at ``base_url`` (a node's, or the proxy's), as Telegram
    does."""
    async with httpx.AsyncClient(timeout=30) as http:
        return await http.post(
            f"{base_url}{HOOK_PATH}",
            json=update,
            headers={"X-Telegram-Bot-Api-Secret-Token": SECRET},
        )


def answer_by_mark(body: dict[str, Any]) -> str:
    """A model reply answering the message it was sent: ``answer msg-N`` (the request is the
    last user message naming one; earlier turns come before it)."""
    users = [m for m in body["messages"] if m.get("role") == "user"]
    marks = [mark for m in users for mark in MARK.findall(str(m.get("content")))]
    return reply(None, f"answer {marks[-1]}")
