"""Checking the figures a worker sends with a block before the host keeps them.

A worker's reply is hostile input (``replies.py``): each figure must be a real PNG whose header
states the size the worker claims, within the per-block limits; its digest is computed here, never
taken from the worker. Anything malformed is a ``ProtocolError`` (the worker is replaced).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import struct
from typing import Any

from cove.environment.sandbox.frames import ProtocolError
from cove.results import BlockFigure, FigureAxes

MAX_FIGURES = 10
MAX_PNG_BYTES = 8 * 1024 * 1024  # all of one block's figures
_TEXT = 200
_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def parse_figures(raw: Any) -> tuple[BlockFigure, ...]:
    """The checked figures of a block reply (an absent list means none).

    Raises:
        ProtocolError: The list or a figure is malformed, too large, or not a PNG.
    """
    if raw is None:
        return ()
    if not isinstance(raw, list) or len(raw) > MAX_FIGURES:
        raise ProtocolError("malformed figures in a block reply")
    figures = []
    total = 0
    for position, item in enumerate(raw):
        figure = _figure(position, item)
        total += len(figure.png or b"")
        if total > MAX_PNG_BYTES:
            raise ProtocolError("a block's figures are too large")
        figures.append(figure)
    return tuple(figures)


def _figure(position: int, item: Any) -> BlockFigure:
    if not isinstance(item, dict) or type(item.get("png")) is not str:
        raise ProtocolError("malformed figure")
    try:
        png = base64.b64decode(item["png"], validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ProtocolError("malformed figure data") from exc
    if png[:8] != _SIGNATURE or len(png) < 24 or png[12:16] != b"IHDR":
        raise ProtocolError("a figure is not a PNG")
    width, height = struct.unpack(">II", png[16:24])
    axes = item.get("axes", [])
    if not isinstance(axes, list) or len(axes) > 8:
        raise ProtocolError("malformed figure axes")
    return BlockFigure(
        position=position,
        digest=hashlib.sha256(png).hexdigest(),
        width=int(width),
        height=int(height),
        title=_text(item.get("title", "")),
        axes=tuple(_axes(entry) for entry in axes),
        png=png,
    )


def _axes(entry: Any) -> FigureAxes:
    if not isinstance(entry, dict):
        raise ProtocolError("malformed figure axes")
    return FigureAxes(
        title=_text(entry.get("title", "")),
        xlabel=_text(entry.get("xlabel", "")),
        ylabel=_text(entry.get("ylabel", "")),
    )


def _text(value: Any) -> str:
    if type(value) is not str:
        raise ProtocolError("malformed figure text")
    return value[:_TEXT]
