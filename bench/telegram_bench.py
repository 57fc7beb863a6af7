"""The Telegram bot under load, against the fake Bot API server (tests/fakes/telegram_server.py).

N chats (default 100) each send one message at the same moment; the model is scripted and takes
50 ms per reply (one iteration: a code block and the answer). Reported:

- turns/s: turns answered per second of wall time, from the first update queued to the last
  answer;
- Bot API calls per turn (sendMessage, editMessageText, sendChatAction, ...; getUpdates and the
  start-up calls left out);
- edits per chat per second while its turn ran, and the busiest second over all chats (as the
  bot sent them, and as they arrived at the fake, which shares the bot's process and GIL, so
  its arrivals bunch up), against Telegram's documented limits (about 1 message a second per
  chat, 30 a second overall);
- p50/p99 time from an update being queued to its answer being sent.

Run twice: with the bot's own pacing (as shipped: python-telegram-bot's ``AIORateLimiter``, 20
calls/s overall; the chats here are private, so the per-group limit does not apply) and
without it (``telegram_rate_per_s`` 0), to show what the bot itself can do.
Run: ``.venv/bin/python bench/telegram_bench.py [--chats 100]``
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cove.channels.telegram import TelegramChannel
from cove.config import Settings, TelegramSettings
from cove.conversation import Conversations, scripted_factory
from tests.fakes.telegram_server import FakeTelegram

STARTUP = {"getMe", "setMyCommands", "deleteWebhook", "getUpdates"}
TELEGRAM_PER_CHAT_PER_S = 1.0
TELEGRAM_OVERALL_PER_S = 30.0


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


async def run(chats: int, rate: float, model_s: float) -> dict[str, Any]:
    reply = json.dumps({"thinking": "", "code": ["x = 6 * 7"], "answer": "It is {{x}}."})
    with tempfile.TemporaryDirectory(prefix="cove-tg-bench-") as tmp, FakeTelegram() as tg:
        settings = Settings.load(env={}, data_dir=Path(tmp), worker_pool_size=2)
        factory = scripted_factory([reply] * chats, delay_s=model_s)
        telegram = TelegramSettings(
            token=tg.token,
            api_url=tg.api_url,
            allow=tuple(str(chat) for chat in range(1, chats + 1)),
            poll_timeout_s=1.0,
            rate_per_s=rate,
        )
        async with await Conversations.open(settings, llm_factory=factory) as convs:
            channel = TelegramChannel(convs, telegram)
            await channel.start()
            try:
                queued = {}
                for chat in range(1, chats + 1):
                    tg.send_text(chat, "what is six times seven?")
                    queued[chat] = time.monotonic()
                await tg.wait_for(
                    lambda: len([c for c in tg.calls if c.params.get("parse_mode")]) >= chats,
                    timeout=600,
                )
                sent = collections.Counter(int(t) for t in channel.outbox.limiter.sent_at)
            finally:
                await channel.stop()
        return {**measure(tg, queued), "busiest_second_sent": max(sent.values())}


def measure(tg: FakeTelegram, queued: dict[int, float]) -> dict[str, Any]:
    calls = [c for c in tg.calls if c.method not in STARTUP]
    answered = {c.params["chat_id"]: c.at for c in calls if c.params.get("parse_mode")}
    latencies = [answered[chat] - at for chat, at in queued.items()]
    first, last = min(queued.values()), max(answered.values())
    per_chat_rates = []
    for chat in queued:
        mine = [c for c in calls if c.params.get("chat_id") == chat]
        edits = [c for c in mine if c.method == "editMessageText"]
        span = max(c.at for c in mine) - min(c.at for c in mine)
        per_chat_rates.append(len(edits) / span if span > 0 else 0.0)
    seconds = collections.Counter(int(c.at - first) for c in calls if c.method != "sendChatAction")
    return {
        "turns": len(answered),
        "turns_per_s": len(answered) / (last - first),
        "calls_per_turn": len(calls) / len(answered),
        "calls_by_method": dict(collections.Counter(c.method for c in calls)),
        "edits_per_chat_per_s_mean": sum(per_chat_rates) / len(per_chat_rates),
        "edits_per_chat_per_s_max": max(per_chat_rates),
        "busiest_second_calls": max(seconds.values()),
        "p50_s": percentile(latencies, 50),
        "p99_s": percentile(latencies, 99),
        "flood_errors": len([c for c in tg.calls if c.error == 429]),
    }


def show(title: str, r: dict[str, Any]) -> None:
    print(f"== {title}")
    print(f"  turns answered           {r['turns']}")
    print(f"  turns/s                  {r['turns_per_s']:.1f}")
    print(f"  Bot API calls per turn   {r['calls_per_turn']:.2f}  {r['calls_by_method']}")
    print(
        f"  edits per chat per s     mean {r['edits_per_chat_per_s_mean']:.2f}, "
        f"max {r['edits_per_chat_per_s_max']:.2f}  (Telegram: ~{TELEGRAM_PER_CHAT_PER_S:.0f}/s "
        "per chat)"
    )
    print(
        f"  busiest second           {r['busiest_second_sent']} calls sent by the bot, "
        f"{r['busiest_second_calls']} arriving at the fake (chat actions aside; "
        f"Telegram: ~{TELEGRAM_OVERALL_PER_S:.0f}/s overall)"
    )
    print(f"  update -> answer         p50 {r['p50_s']:.2f} s, p99 {r['p99_s']:.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chats", type=int, default=100)
    parser.add_argument("--model-ms", type=float, default=50.0)
    args = parser.parse_args()
    paced = asyncio.run(run(args.chats, TelegramSettings.rate_per_s, args.model_ms / 1000))
    show(f"{args.chats} chats, {args.model_ms:.0f} ms model, paced as shipped", paced)
    free = asyncio.run(run(args.chats, 0.0, args.model_ms / 1000))
    show(f"{args.chats} chats, {args.model_ms:.0f} ms model, pacing off", free)


if __name__ == "__main__":
    main()
