"""Loading the data libraries into a worker (or the zygote) before it is confined.

Imported inside a sealed worker the libraries fail (shared libraries and the standard library are
out of reach once Landlock and the user drop are in force), so they are imported, and exercised
on a short representative workload, while the process can still read everything: in the zygote
before ``gc.freeze`` and the fork, in a cold worker before it confines itself. The workload runs
the code paths that import lazily (pandas' readers, resampling, Excel through openpyxl, a plot
rendered to PNG), so what a block later calls is already in ``sys.modules``.

Two things the libraries do on their own would break a worker:

- BLAS and OpenMP start threads; a worker may not create any (``RLIMIT_NPROC`` 0) and a matrix
  product then hangs. Every pool is limited to one thread before numpy is imported.
- matplotlib keeps its font files open. The zygote closes every descriptor it does not know
  before forking, behind the library's back, and the numbers are then reused for the worker's
  pipes. The font cache is emptied and collected after the warm-up, so no descriptor stays open.
"""

from __future__ import annotations

import gc
import io
import os
from dataclasses import dataclass
from types import ModuleType
from typing import Any

THREAD_LIMITS = {
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "NUMEXPR_NUM_THREADS": "1",
    "VECLIB_MAXIMUM_THREADS": "1",
}
"""Set before numpy loads: one thread per pool (a worker cannot start threads)."""

LIBRARY_ROOTS = ("numpy", "pandas", "matplotlib", "openpyxl", "PIL", "dateutil", "contourpy")
"""Top-level packages the data libraries consist of (their objects are checked by
``surface.py``; their own imports from C code resolve to the loaded modules)."""

INSTALL_HINT = "install cove with its data extra: pip install 'cove[data]'"


@dataclass(frozen=True)
class Libraries:
    """The loaded library modules a worker's curated namespaces are built from."""

    numpy: ModuleType
    pandas: ModuleType
    matplotlib: ModuleType
    pyplot: ModuleType


_loaded: Libraries | None = None
_missing: str | None = None


def load() -> Libraries | None:
    """Import the libraries (once per process); None when they are not installed."""
    global _loaded, _missing
    if _loaded is not None or _missing is not None:
        return _loaded
    for name, value in THREAD_LIMITS.items():
        os.environ[name] = value
    os.environ["MPLBACKEND"] = "Agg"
    try:
        import matplotlib
        import numpy
        import openpyxl  # noqa: F401 - read_excel/to_excel need it; imported while reachable
        import pandas

        matplotlib.use("Agg", force=True)
        import matplotlib.pyplot as pyplot
    except ImportError as exc:
        _missing = str(exc)
        return None
    _disable_tex(matplotlib)
    _excel_in_memory()
    from cove.environment.sandbox.worker.data.pandas_api import restrict_plot_backend

    restrict_plot_backend(pandas)
    _loaded = Libraries(numpy=numpy, pandas=pandas, matplotlib=matplotlib, pyplot=pyplot)
    return _loaded


def missing() -> str | None:
    """Why the libraries could not be loaded (None when loaded or not tried)."""
    return _missing


def _disable_tex(matplotlib: ModuleType) -> None:
    """LaTeX rendering runs ``latex``/``dvipng`` subprocesses: refused before it tries."""
    from matplotlib import texmanager

    def refuse(*args: object, **kwargs: object) -> str:
        raise RuntimeError("LaTeX text rendering (usetex) is not available in the sandbox")

    manager: Any = texmanager.TexManager
    for name in ("make_dvi", "make_png", "_run_checked_subprocess"):
        setattr(manager, name, classmethod(refuse))


def _excel_in_memory() -> None:
    """openpyxl writes each worksheet to a temporary file first; a worker can write no file, so
    worksheets are written in memory (the same bytes end up in the workbook)."""
    from openpyxl.drawing.spreadsheet_drawing import SpreadsheetDrawing
    from openpyxl.worksheet._writer import WorksheetWriter
    from openpyxl.writer import excel

    original = excel.ExcelWriter.write_worksheet

    def write_worksheet(self: Any, ws: Any) -> None:
        if self.workbook.write_only:
            original(self, ws)
            return
        ws._drawing = SpreadsheetDrawing()
        ws._drawing.charts = ws._charts
        ws._drawing.images = ws._images
        writer = WorksheetWriter(ws, out=io.BytesIO())
        writer.write()
        ws._rels = writer._rels
        self._archive.writestr(ws.path[1:], writer.read())
        self.manifest.append(ws)

    excel.ExcelWriter.write_worksheet = write_worksheet


_CSV = """day,region,units,price
2024-01-01,north,3,2.5
2024-01-01,south,5,2.0
2024-01-02,north,4,2.5
2024-01-03,south,1,3.0
2024-01-05,north,7,2.5
"""


def warm_up(libraries: Libraries) -> None:
    """Run the representative workload, then leave no figure and no open descriptor behind."""
    np, pd, plt = libraries.numpy, libraries.pandas, libraries.pyplot
    frame = pd.read_csv(io.StringIO(_CSV), parse_dates=["day"])
    frame["revenue"] = frame["units"] * frame["price"]
    frame["month"] = pd.to_datetime(frame["day"]).dt.to_period("M").astype(str)
    frame["label"] = frame["region"].str.upper().str.slice(0, 3)
    totals = frame.groupby("region", as_index=False).agg(total=("revenue", "sum"))
    merged = frame.merge(totals, on="region", how="left")
    merged.pivot_table(index="day", columns="region", values="units", aggfunc="sum", fill_value=0)
    daily = frame.set_index("day")["units"].resample("D").sum()
    daily.rolling(2, min_periods=1).mean().ewm(span=2).mean()
    frame.describe(include="all")
    frame["region"].value_counts().to_dict()
    frame.sort_values("units").head(2).to_string()
    frame.to_json(orient="records")
    frame.to_csv(io.StringIO(), index=False)
    frame["region"].astype("category").cat.codes.sum()
    pd.concat([frame, frame]).drop_duplicates().reset_index(drop=True)
    pd.date_range("2024-01-01", periods=3, freq="MS")
    pd.Timestamp("2024-01-01") + pd.Timedelta(days=1)
    workbook = io.BytesIO()
    frame.to_excel(workbook, index=False)
    workbook.seek(0)
    pd.read_excel(workbook)
    matrix = np.arange(16.0).reshape(4, 4) + np.eye(4)
    np.linalg.solve(matrix, np.ones(4))
    np.linalg.inv(matrix) @ matrix
    np.linalg.eigvals(matrix)
    np.fft.rfft(np.sin(np.linspace(0, 6.28, 64)))
    generator = np.random.default_rng(0)
    generator.normal(size=8).mean()
    np.quantile(generator.integers(0, 10, size=10), [0.25, 0.5])
    buffer = io.BytesIO()
    np.save(buffer, matrix, allow_pickle=False)
    buffer.seek(0)
    np.load(buffer, allow_pickle=False)
    _plot(plt, frame, daily)
    _release(libraries)


def _plot(plt: ModuleType, frame: object, daily: object) -> None:
    figure, axes = plt.subplots(1, 2, figsize=(4, 2))
    axes[0].plot([1, 2, 3], [1, 4, 9], marker="o", label="squares")
    axes[0].bar(["a", "b"], [1, 2])
    axes[0].set_title("warm-up")
    axes[0].set_xlabel("x")
    axes[0].legend()
    axes[1].scatter([1, 2], [2, 1])
    axes[1].hist([1, 2, 2, 3])
    daily.plot(ax=axes[1])  # type: ignore[attr-defined]
    frame.plot(x="day", y="units", ax=axes[1])  # type: ignore[attr-defined]
    figure.suptitle("warm-up")
    figure.tight_layout()
    figure.savefig(io.BytesIO(), format="png")
    figure.savefig(io.BytesIO(), format="svg")
    plt.close("all")


def _release(libraries: Libraries) -> None:
    """Close every font file matplotlib holds open and collect what the workload left."""
    from matplotlib import font_manager

    font_manager._get_font.cache_clear()  # type: ignore[attr-defined]
    libraries.pyplot.close("all")
    gc.collect()
