"""Figures in Telegram: the data conversation of issue #24 through the real bot (two CSV files
sent, the pandas answer's number, the chart as a ``sendPhoto`` on the Bot API wire after the
answer), and the edges: a flood wait on a photo, a figure too wide to be a photo, a photo
Telegram refuses. The sandbox has numpy, pandas and matplotlib loaded."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from tests.channels.data_story import (
    CHART_REQUEST,
    CHART_TITLE,
    MANAGERS,
    QUESTION,
    SALES,
    expected_answer,
    story_replies,
)
from tests.channels.telegram.conftest import ALLOWED, BotFactory
from tests.channels.telegram.test_bot import has_text
from tests.fakes.telegram_server import FakeTelegram
from tests.scripted import reply, settings_for

pytestmark = pytest.mark.slow  # sandbox workers started per test


def sent_after(tg: FakeTelegram, method: str, text: str) -> bool:
    """Whether a ``method`` call reached the chat after the message containing ``text``."""
    calls = [c for c in tg.calls if c.error is None and c.params.get("chat_id") == ALLOWED]
    said = [i for i, c in enumerate(calls) if text in str(c.params.get("text", ""))]
    return bool(said) and any(c.method == method for c in calls[said[0] :])


async def test_the_data_conversation_ends_with_the_chart_as_a_photo(
    bot: BotFactory, tmp_path: Path
) -> None:
    settings = settings_for(tmp_path, sandbox_libraries=True)
    first = reply([], "I have sales.csv; send the next file or your question.")
    async with bot([first, *story_replies()], settings=settings) as b:
        tg = b.tg
        tg.send_document(ALLOWED, SALES.encode(), "sales.csv")
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "I have sales.csv"))
        tg.send_document(ALLOWED, MANAGERS.encode(), "managers.csv", caption=QUESTION)
        await tg.wait_for(lambda: has_text(tg, ALLOWED, expected_answer()))
        assert not tg.calls_of("sendPhoto")  # no figure yet, no photo

        tg.send_text(ALLOWED, CHART_REQUEST)
        await tg.wait_for(lambda: tg.calls_of("sendPhoto", ALLOWED))
        [photo] = tg.calls_of("sendPhoto", ALLOWED)
        name, png = photo.files["photo"]
        assert name == "t3-i1-b1-1.png" and png.startswith(b"\x89PNG")
        assert photo.params["caption"] == f"{CHART_TITLE}\nx: month · y: units"
        assert sent_after(tg, "sendPhoto", "Here is the chart")  # after the answer
        [conv] = await b.convs.list()
        block = (await b.convs.inspect(conv.id, turn=3)).turns[0].iterations[0].blocks[0]
        [figure] = block.figures
        assert hashlib.sha256(png).hexdigest() == figure.digest
        assert not tg.calls_of("sendDocument", ALLOWED)  # the figure is no workspace file


async def test_a_flood_wait_a_figure_too_wide_and_a_refused_photo(
    bot: BotFactory, tmp_path: Path
) -> None:
    code = (
        "import matplotlib.pyplot as plt\n"
        "plt.figure(figsize=(4, 3)); plt.plot([1, 2]); plt.title('first')\n"
        "plt.figure(figsize=(120, 1)); plt.plot([1, 2]); plt.title('a long strip')\n"
        "plt.figure(figsize=(4, 3)); plt.plot([2, 1]); plt.title('refused')"
    )
    settings = settings_for(tmp_path, sandbox_libraries=True)
    async with bot([reply([code], "three figures")], settings=settings) as b:
        tg = b.tg
        tg.fail_next("sendPhoto", 429, retry_after=1)  # flood control: waited out, then sent
        tg.fail_next(
            "sendPhoto",
            400,
            "Bad Request: PHOTO_INVALID_DIMENSIONS",
            when=lambda params: params.get("caption") == "refused",
        )
        tg.send_text(ALLOWED, "three charts")
        await tg.wait_for(lambda: len(tg.calls_of("sendDocument", ALLOWED)) == 2)
        photos = [c for c in tg.calls_of("sendPhoto", ALLOWED) if c.error is None]
        assert [c.params["caption"] for c in photos] == ["first"]
        assert [c.error for c in tg.calls_of("sendPhoto", ALLOWED)] == [429, None, 400]
        documents = tg.calls_of("sendDocument", ALLOWED)
        assert [c.params["caption"] for c in documents] == ["a long strip", "refused"]
        assert [c.files["document"][0] for c in documents] == ["t1-i1-b1-2.png", "t1-i1-b1-3.png"]
        assert has_text(tg, ALLOWED, "three figures")
