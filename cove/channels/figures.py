"""Figures as files, for the channels that cannot show an image in place.

The database keeps every figure a block made (``Reading.figure`` reads one by its
digest). A terminal cannot show an image inline everywhere, so ``cove run``, ``cove show``,
``cove watch`` and the TUI write the figures they report to
``<figures>/<conversation id>/t<turn>-i<iteration>-b<block>-<n>.png`` (``StoreSettings.figures``:
beside the database, outside every workspace, so no quota is used and no sandbox sees them) and
name the paths; an export written to a file puts them in a folder beside it
(``export_folder``). A file is written again, identical, whenever a channel shows it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cove.channels.export import FigureLinks, approvals_json, to_markdown, transcript_json
from cove.conversation import Reading, Transcript, TurnRecord
from cove.results import BlockFigure
from cove.text import json_escaped

#: Where a figure was made: turn position, iteration and block (both from 1).
FigureRef = tuple[int, int, int]


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


def figure_name(ref: FigureRef, index: int) -> str:
    """The file name of figure ``index`` (0-based) of block ``ref``: ``t1-i2-b3-1.png``."""
    turn, iteration, block = ref
    return f"t{turn}-i{iteration}-b{block}-{index + 1}.png"


def figure_path(root: Path, conversation_id: str, ref: FigureRef, index: int) -> Path:
    """Where figure ``index`` (0-based) of block ``ref`` (turn, iteration, block; 1-based
    block) is written."""
    return root / conversation_id / figure_name(ref, index)


def figures_in(transcript: Transcript) -> list[tuple[FigureRef, BlockFigure]]:
    """Every figure of a transcript with where it was made, in order."""
    return [found for turn in transcript.turns for found in turn_figures(turn)]


def turn_figures(turn: TurnRecord) -> list[tuple[FigureRef, BlockFigure]]:
    """Every figure of a turn with where it was made, in order."""
    return [
        ((turn.position, it.position + 1, block.position + 1), figure)
        for it in turn.iterations
        for block in it.blocks
        for figure in block.figures
    ]


def export_folder(document: Path) -> Path:
    """The folder an export written to ``document`` keeps its figures in: ``notes.figures``
    beside ``notes.md``."""
    return document.with_name(f"{document.stem}.figures")


async def save_figures(
    convs: Reading,
    conversation_id: str,
    found: Iterable[tuple[FigureRef, BlockFigure]],
    folder: Path | None = None,
) -> list[SavedFigure]:
    """Write each figure (fetched from the database by its digest); the files written.

    Args:
        convs: The conversations the figures belong to.
        conversation_id: Their conversation.
        found: The figures with where they were made.
        folder: Where to write them; default ``<figures>/<conversation id>``.

    Raises:
        OSError: A file could not be written.
        NotFound: A figure is not in the conversation.
    """
    target = folder or convs.settings.store.figures / conversation_id
    saved = []
    for ref, figure in found:
        data = await convs.figure(conversation_id, figure.digest)
        path = target / figure_name(ref, figure.position)
        await asyncio.to_thread(_write, path, data)
        saved.append(SavedFigure(path, ref[0], ref[1], ref[2], figure))
    return saved


async def write_export(
    convs: Reading, transcript: Transcript, document: Path, fmt: str
) -> list[SavedFigure]:
    """Write a transcript's document (``md`` or ``json``) to ``document`` and its figures into
    ``export_folder(document)``; the figures written.

    The Markdown shows each figure as an image of its file (a path relative to the document);
    the JSON (that of ``cove show --json``, value figures included) names the file of each
    figure (``file``).

    Raises:
        OSError: The document or a figure could not be written.
    """
    cid = transcript.conversation.id
    folder = export_folder(document)
    saved = await save_figures(convs, cid, figures_in(transcript), folder)
    if fmt == "md":
        links = FigureLinks(lambda ref, f: f"{folder.name}/{figure_name(ref, f.position)}")
        text = to_markdown(transcript, links)
    else:
        values = await convs.history(cid)
        data = {
            **transcript_json(transcript),
            "values": dataclasses.asdict(values),
            "approvals": approvals_json(await convs.approvals(cid)),
        }
        for turn in data["turns"]:
            for it in turn["iterations"]:
                for block in it["blocks"]:
                    ref = (turn["position"], it["position"], block["position"])
                    for figure in block["figures"]:
                        figure["file"] = f"{folder.name}/{figure_name(ref, figure['position'])}"
        text = json_escaped(json.dumps(data, indent=1))
    await asyncio.to_thread(_write, document, (text + "\n").encode())
    return saved


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.write_bytes(data)
