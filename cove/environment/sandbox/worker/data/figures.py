"""The figures of a block: styling it changes ends with it, and every figure it leaves open
(shown or not) is rendered to PNG and closed when it ends.

Styling is scoped like ``rc_context`` but cheaper per block: ``rcParams`` is compared with a copy
taken when the worker started (a C-level comparison, which also sees lists changed in place) and
put back only when the block changed it.

A rendered figure travels to the host in the block's reply as ``{"png": base64, "width",
"height", "title", "axes": [{"title", "xlabel", "ylabel"}]}``; the host stores it with the block
(not as a variable) and tells the model it was made. PNGs carry no creation time or version, so
the same figure gives the same bytes (replay compares them).
"""

from __future__ import annotations

import base64
import copy
import io
import operator
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
_IMMUTABLE = (str, int, float, bool, tuple, type(None))


class BlockFigures:
    """Opens a block's rc scope and collects its figures when it ends."""

    def __init__(self, libraries: Libraries) -> None:
        self._rc = libraries.matplotlib.rcParams
        self._pyplot = libraries.pyplot
        self._baseline = copy.deepcopy(dict(self._rc))
        # Values that can change in place (lists, cyclers...) are compared by value; the rest
        # by identity with the objects held when the styling was last put back.
        self._mutable = [
            key for key, value in self._baseline.items() if not isinstance(value, _IMMUTABLE)
        ]
        self._held = list(dict.values(self._rc))
        self.styling_reachable = False
        """Set once sandbox code can reach ``rcParams`` (the pyplot namespace was built): until
        then no block can have changed them and the check is skipped."""

    def begin(self) -> None:
        """Start a block: no figure open."""
        if self._pyplot.get_fignums():
            self._pyplot.close("all")

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
            self._restore_styling()
        return figures, notes

    def _restore_styling(self) -> None:
        """Put ``rcParams`` back as the worker started, if the block changed them."""
        if not self.styling_reachable:
            return
        rc, baseline = self._rc, self._baseline
        same = len(rc) == len(self._held) and all(map(operator.is_, dict.values(rc), self._held))
        if same and all(dict.__getitem__(rc, key) == baseline[key] for key in self._mutable):
            return
        dict.clear(rc)
        dict.update(rc, copy.deepcopy(baseline))
        self._held = list(dict.values(rc))


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
