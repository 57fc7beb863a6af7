"""The figures of a block: each runs in its own ``rc_context``, and every figure it leaves open
(shown or not) is rendered to PNG and closed when it ends.

A rendered figure travels to the host in the block's reply as ``{"png": base64, "width",
"height", "title", "axes": [{"title", "xlabel", "ylabel"}]}``; the host stores it with the block
(not as a variable) and tells the model it was made. PNGs carry no creation time or version, so
the same figure gives the same bytes (replay compares them).
"""

from __future__ import annotations

import base64
import io
import struct
from typing import Any

from cove.environment.sandbox.worker.data.libraries import Libraries

MAX_FIGURES = 10
"""Figures rendered per block; more are closed unrendered (the block's output says so)."""

MAX_PIXELS = 25_000_000
"""The largest figure rendered (width x height at its dpi)."""

MAX_FIGURE_BYTES = 8 * 1024 * 1024
"""The PNG bytes one block's figures may take in total."""

_TEXT = 200  # characters kept of a title or label


class BlockFigures:
    """Opens a block's rc scope and collects its figures when it ends."""

    def __init__(self, libraries: Libraries) -> None:
        self._matplotlib = libraries.matplotlib
        self._pyplot = libraries.pyplot
        self._scope: Any = None

    def begin(self) -> None:
        """Start a block: no figure open, styling changes scoped to the block."""
        self._pyplot.close("all")
        self._scope = self._matplotlib.rc_context()
        self._scope.__enter__()

    def end(self) -> tuple[list[dict[str, Any]], list[str]]:
        """Render and close every open figure; the figures' wire forms and notes for the output.

        Never raises: a figure that cannot be rendered is reported in the notes.
        """
        figures: list[dict[str, Any]] = []
        notes: list[str] = []
        used = 0
        try:
            for number in self._pyplot.get_fignums():
                figure = self._pyplot.figure(number)
                if len(figures) >= MAX_FIGURES:
                    notes.append(f"figure {number} not rendered: at most {MAX_FIGURES} per block")
                    continue
                try:
                    rendered = render(figure)
                except Exception as exc:  # a broken artist must not lose the block
                    notes.append(f"figure {number} could not be rendered: {exc}"[:300])
                    continue
                used += len(rendered["png"])
                if used > MAX_FIGURE_BYTES * 4 // 3:
                    notes.append(f"figure {number} not rendered: the block's figures are too large")
                    continue
                figures.append(rendered)
        finally:
            self._pyplot.close("all")
            scope, self._scope = self._scope, None
            if scope is not None:
                scope.__exit__(None, None, None)
        return figures, notes


def render(figure: Any) -> dict[str, Any]:
    """The wire form of one figure: its PNG (base64) and what the model is told about it.

    Raises:
        ValueError: The figure is too large to render.
    """
    width_in, height_in = figure.get_size_inches()
    if width_in * height_in * figure.dpi**2 > MAX_PIXELS:
        raise ValueError(f"{width_in:g}x{height_in:g} inches at {figure.dpi:g} dpi is too large")
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", metadata={"Software": None})
    png = buffer.getvalue()
    width, height = png_size(png)
    axes = [
        {
            "title": ax.get_title()[:_TEXT],
            "xlabel": ax.get_xlabel()[:_TEXT],
            "ylabel": ax.get_ylabel()[:_TEXT],
        }
        for ax in figure.get_axes()[:8]
    ]
    suptitle = figure.get_suptitle() if hasattr(figure, "get_suptitle") else ""
    title = suptitle or next((a["title"] for a in axes if a["title"]), "")
    return {
        "png": base64.b64encode(png).decode("ascii"),
        "width": width,
        "height": height,
        "title": title[:_TEXT],
        "axes": axes,
    }


def png_size(png: bytes) -> tuple[int, int]:
    """Width and height of a PNG (its IHDR chunk)."""
    if png[:8] != b"\x89PNG\r\n\x1a\n" or len(png) < 24:
        raise ValueError("not a PNG")
    width, height = struct.unpack(">II", png[16:24])
    return int(width), int(height)
