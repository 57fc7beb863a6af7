"""What the model is told about numpy, pandas and matplotlib when the sandbox offers them.

The system prompt's module list names the standard library only; this section joins the
extensions' documentation when the libraries are installed on this host and switched on
(``sandbox_libraries``), so the prompt never promises a module the sandbox refuses. Fixed text:
the system prompt stays the same from turn to turn.
"""

from __future__ import annotations

import functools
import importlib.util

from cove.config import SandboxSettings

DATA_DOCS = """\
## Data libraries
import numpy (with numpy.linalg, numpy.random, numpy.fft), pandas and matplotlib.pyplot \
(also matplotlib.colors, matplotlib.dates, matplotlib.ticker) work as usual, with these \
differences:
- A file is a name in your workspace: pd.read_csv('sales.csv'), pd.read_excel('q3.xlsx'), \
df.to_csv('out.csv'), df.to_excel('out.xlsx'), fig.savefig('chart.png'), np.load/np.save. No \
other paths, no URLs, no open file objects.
- Every figure still open when a block ends is rendered and shown to the user, and you are told \
its size, title and axis labels: give charts a title and axis labels; plt.show() is not needed.
- Arrays, DataFrames and Series are saved like other variables and survive restarts (columns of \
Python objects only when they hold plain values).
- numpy.random and df.sample() are seeded per block and replay identically.
- Not available: DataFrame.eval/query and pd.eval (use boolean masks), pickle, pd.set_option, \
SQL, the clipboard, ctypes, setting attributes other than columns/index/name(s). agg, apply and \
transform take functions, or the names of common reductions ('sum', 'mean', 'count', ...).
"""


def data_docs(settings: SandboxSettings) -> str:
    """The section, or "" when the libraries are switched off or not installed."""
    if not settings.sandbox_libraries or not _installed():
        return ""
    return DATA_DOCS


@functools.cache
def _installed() -> bool:
    """Whether the data libraries are installed (looked up once per process: every turn asks)."""
    needed = ("numpy", "pandas", "matplotlib", "openpyxl")
    return all(importlib.util.find_spec(name) is not None for name in needed)
