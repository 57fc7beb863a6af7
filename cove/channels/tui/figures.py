"""Figures in the terminal UI: a placeholder line per figure under its block (drawn by the
iteration widget, ``widgets/iteration.py``), which ``o`` opens.

Opening a figure writes its PNG where ``cove run`` writes it (``channels/figures.py``) and names
the path, in a notification and on the figure's line; with ``figure_viewer`` configured (a
command such as ``xdg-open`` or ``feh``, given the file as its last argument) the file is also
opened with it. The image is not drawn inside the terminal: an iteration is one widget whatever
it holds (the pane's layout cost stays bounded), the graphics protocols that could draw it
(Kitty, Sixel, iTerm2) are answered by few terminals and not through tmux, and a chart drawn in
character cells loses its labels. A real image viewer shows it as it is.
"""

from __future__ import annotations

import asyncio
import shlex
from pathlib import Path

from cove.channels.figures import FigureRef, save_figures
from cove.channels.tui.format import clean
from cove.channels.tui.host import AppHost
from cove.channels.tui.widgets.iteration import IterationView
from cove.results import BlockFigure


async def open_figures(
    app: AppHost, view: IterationView, found: list[tuple[FigureRef, BlockFigure]]
) -> None:
    """Write the figures to files, name the paths, and open them with the configured viewer.

    Raises:
        OSError: A file could not be written, or the viewer could not be started.
    """
    if app.current is None:
        return
    saved = await save_figures(app.convs, app.current, found)
    view.figures_saved({(s.turn, s.iteration, s.block, s.figure.position): s.path for s in saved})
    app.notify("\n".join(f"figure saved: {clean(str(s.path))}" for s in saved), timeout=15)
    viewer = app.convs.settings.tui.figure_viewer
    if viewer:
        opened = [await _start(shlex.split(viewer), figure.path) for figure in saved]
        await asyncio.gather(*(process.wait() for process in opened))


async def _start(command: list[str], path: Path) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *command,
        str(path),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
        start_new_session=True,  # a Ctrl-C in the app is not the viewer's
    )
