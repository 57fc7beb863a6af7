"""A turn's figures in a chat: each one a photo after the answer, captioned with its title and
axis labels.

Telegram takes a photo of at most 10 MB whose width and height add up to at most 10,000 pixels,
neither side over 20 times the other; a figure outside that (a very wide plot) goes as a
document, and so does one Telegram refuses as a photo. Everything goes through the ``Outbox``
(its pace, its flood-control waits). A turn sends at most ``MAX_PHOTOS``; the rest are named in
one line (``/export`` lists them all).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from telegram.error import BadRequest

from cove.channels.figures import FigureRef, figure_name
from cove.channels.telegram.outbox import ChatRef, Outbox
from cove.results import BlockFigure

log = logging.getLogger("cove.telegram")

MAX_PHOTOS = 10
PHOTO_MAX_BYTES = 10 * 1024 * 1024
PHOTO_MAX_SIDES = 10_000  # width + height
PHOTO_MAX_RATIO = 20
MAX_CAPTION = 1024

#: Reads a figure's PNG by its digest (``Conversations.figure`` of the turn's conversation).
Fetch = Callable[[str], Awaitable[bytes]]


def caption(figure: BlockFigure) -> str:
    """The photo's caption: the title (or "Figure N"), then each axes' labels."""
    lines = [figure.title or f"Figure {figure.position + 1}"]
    for axes in figure.axes:
        labels = [f"{k}: {v}" for k, v in (("x", axes.xlabel), ("y", axes.ylabel)) if v]
        if axes.title and axes.title != figure.title:
            labels.insert(0, axes.title)
        if labels:
            lines.append(" · ".join(labels))
    text = "\n".join(lines)
    return text if len(text) <= MAX_CAPTION else text[: MAX_CAPTION - 1] + "…"


def fits_a_photo(figure: BlockFigure, size: int) -> bool:
    """Whether Telegram takes the figure as a photo (size and proportions)."""
    short, long = sorted((max(1, figure.width), max(1, figure.height)))
    return (
        size <= PHOTO_MAX_BYTES
        and figure.width + figure.height <= PHOTO_MAX_SIDES
        and long <= short * PHOTO_MAX_RATIO
    )


async def send_figures(
    outbox: Outbox, chat: ChatRef, found: list[tuple[FigureRef, BlockFigure]], fetch: Fetch
) -> None:
    """Send each figure as a photo (or a document when it cannot be one), in order.

    Raises:
        telegram.error.TelegramError: A send failed for good (after the outbox's retries).
    """
    for ref, figure in found[:MAX_PHOTOS]:
        data = figure.png if figure.png is not None else await fetch(figure.digest)
        name, text = figure_name(ref, figure.position), caption(figure)
        if fits_a_photo(figure, len(data)):
            try:
                await outbox.photo(chat, name, data, caption=text)
                continue
            except BadRequest as exc:  # refused as a photo: it still arrives, as a file
                log.warning("figure %s refused as a photo (%s); sent as a file", name, exc)
        await outbox.document(chat, name, data, caption=text)
    if len(found) > MAX_PHOTOS:
        more = len(found) - MAX_PHOTOS
        await outbox.plain(chat, f"…and {more} more figures (/export lists every one).")
