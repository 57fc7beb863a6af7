"""Figures for the terminal: the CLI writes each figure a turn made to a PNG file and names it.

A terminal cannot show an image inline everywhere, so ``cove run`` (and ``cove show``) write the
figures they report to ``<figures>/<conversation id>/t<turn>-i<iteration>-b<block>-<n>.png``
(``StoreSettings.figures``: beside the database, outside every workspace, so no quota is used and
no sandbox sees them) and print the paths. The database keeps the figures themselves; a file is
written again, identical, whenever a command shows it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cove.conversation import Conversations
from cove.results import BlockFigure


@dataclass(frozen=True)
class SavedFigure:
    """A figure written to a file."""

    path: Path
    turn: int
    iteration: int
    block: int
    figure: BlockFigure

    def to_json(self) -> dict[str, Any]:
        """The figure as ``--json`` and ``--events`` print it."""
        return {
            "path": str(self.path),
            "turn": self.turn,
            "iteration": self.iteration,
            "block": self.block,
            "figure": self.figure.position + 1,
            "digest": self.figure.digest,
            "width": self.figure.width,
            "height": self.figure.height,
            "title": self.figure.title,
            "description": self.figure.describe(),
        }

    def line(self) -> str:
        """How the terminal names it."""
        return f"figure: {self.path} ({self.figure.describe().partition(': ')[2]})"


def figure_path(root: Path, conversation_id: str, ref: tuple[int, int, int], index: int) -> Path:
    """Where figure ``index`` (0-based) of block ``ref`` (turn, iteration, block; 1-based
    block) is written."""
    turn, iteration, block = ref
    return root / conversation_id / f"t{turn}-i{iteration}-b{block}-{index + 1}.png"


async def save_figures(
    convs: Conversations,
    conversation_id: str,
    found: list[tuple[tuple[int, int, int], BlockFigure]],
) -> list[SavedFigure]:
    """Write each figure (fetched from the database by its digest); the files written."""
    root = convs.settings.store.figures
    saved = []
    for ref, figure in found:
        data = await convs.figure(conversation_id, figure.digest)
        path = figure_path(root, conversation_id, ref, figure.position)
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        path.write_bytes(data)
        saved.append(SavedFigure(path, ref[0], ref[1], ref[2], figure))
    return saved
