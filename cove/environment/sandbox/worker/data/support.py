"""What a worker's runtime gets from the data libraries: their curated namespaces, the surface
its attribute guard checks, the block's random generator and the block's figures.

``DataSupport.create`` returns None when the libraries are not installed; the runtime then offers
the standard library only, and importing ``numpy``, ``pandas`` or ``matplotlib`` fails with a
message saying how to install them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cove.environment.sandbox.worker.data import libraries as libs
from cove.environment.sandbox.worker.data.classes import build_surfaces
from cove.environment.sandbox.worker.data.figures import BlockFigures
from cove.environment.sandbox.worker.data.files import HostCall, WorkspaceFiles
from cove.environment.sandbox.worker.data.numpy_api import (
    BlockGenerator,
    fft_members,
    linalg_members,
    numpy_members,
    stride_tricks_members,
)
from cove.environment.sandbox.worker.data.pandas_api import pandas_members
from cove.environment.sandbox.worker.data.pyplot_api import public_members, pyplot_members
from cove.environment.sandbox.worker.data.surface import Surfaces

if TYPE_CHECKING:
    from cove.environment.sandbox.worker.modules import ModuleNamespace, ModuleTable

Members = dict[str, Any]
Builder = Callable[["ModuleTable"], Members]


class DataSupport:
    """The data libraries as one worker offers them."""

    def __init__(
        self,
        libraries: libs.Libraries,
        call: HostCall,
        output: Callable[[str], None],
        now: Callable[[], float],
    ) -> None:
        self.libraries = libraries
        self.files = WorkspaceFiles(call)
        self.random = BlockGenerator(libraries.numpy)
        self.figures = BlockFigures(libraries)
        self.surfaces: Surfaces = build_surfaces(
            libraries,
            self.files,
            output=output,
            generator=self.random.default_rng,
            now=now,
        )

    @classmethod
    def create(
        cls, call: HostCall, output: Callable[[str], None], now: Callable[[], float]
    ) -> DataSupport | None:
        """The support of the installed libraries, or None when they are not installed."""
        loaded = libs.load()
        return None if loaded is None else cls(loaded, call, output, now)

    def builders(self) -> dict[str, Builder]:
        """How each library module's curated members are built."""
        np, pd = self.libraries.numpy, self.libraries.pandas
        import matplotlib.colors
        import matplotlib.dates
        import matplotlib.ticker

        def sub(table: ModuleTable, *names: str) -> dict[str, ModuleNamespace]:
            return {name.rsplit(".", 1)[1]: table.get(name) for name in names}

        return {
            "numpy": lambda table: numpy_members(
                np,
                self.files,
                sub(table, "numpy.linalg", "numpy.fft", "numpy.random", "numpy.lib"),
            ),
            "numpy.linalg": lambda table: linalg_members(np),
            "numpy.fft": lambda table: fft_members(np),
            "numpy.random": lambda table: self.random.members(),
            "numpy.lib": lambda table: sub(table, "numpy.lib.stride_tricks"),
            "numpy.lib.stride_tricks": lambda table: stride_tricks_members(np),
            "pandas": lambda table: pandas_members(pd, self.files),
            "matplotlib": lambda table: sub(
                table,
                "matplotlib.pyplot",
                "matplotlib.colors",
                "matplotlib.dates",
                "matplotlib.ticker",
            ),
            "matplotlib.pyplot": self._pyplot,
            "matplotlib.colors": lambda table: public_members(matplotlib.colors),
            "matplotlib.dates": lambda table: public_members(matplotlib.dates),
            "matplotlib.ticker": lambda table: public_members(matplotlib.ticker),
        }

    def _pyplot(self, table: ModuleTable) -> Members:
        self.figures.styling_reachable = True
        return pyplot_members(self.libraries.pyplot, self.files)

    def begin_block(self, seed: int) -> None:
        """Before a block: its random stream and its figure scope."""
        self.random.seed(seed)
        self.figures.begin()

    def end_block(self) -> tuple[list[dict[str, Any]], list[str]]:
        """After a block: its rendered figures and notes for its output."""
        return self.figures.end()
