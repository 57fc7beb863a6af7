"""The curated ``pandas`` namespace.

Every public function and class of ``pandas`` is handed out except what evaluates strings
(``eval``), runs pickle (``read_pickle``, ``to_pickle``), touches paths, databases, the clipboard
or the network (``read_sql*``, ``read_clipboard``, ``read_html``, ``read_xml``, ``HDFStore``,
``ExcelFile``, ``ExcelWriter`` and the binary formats whose engines are not installed), and
process-wide state (``set_option`` and friends: ``option_context('plotting.backend', name)`` would
make pandas import any module by name). Submodules (``api``, ``io``, ``plotting``...) are not
members. The text and Excel readers take a workspace file name and read it through the host.

pandas' plotting picks a backend module by name (``df.plot(backend=...)``): the worker allows only
matplotlib (``restrict_plot_backend``).
"""

from __future__ import annotations

import io
import types
from collections.abc import Callable
from typing import Any

from cove.environment.sandbox.worker.data.files import WorkspaceFiles

Members = dict[str, Any]

REMOVED = {
    "eval": "evaluates an expression string that reaches any attribute (__class__, __globals__)",
    "read_pickle": "runs pickle",
    "to_pickle": "runs pickle",
    "read_clipboard": "the host's clipboard",
    "read_sql": "a database connection",
    "read_sql_query": "a database connection",
    "read_sql_table": "a database connection",
    "read_html": "fetches URLs and needs a parser that is not installed",
    "read_xml": "fetches URLs and needs a parser that is not installed",
    "read_hdf": "a path read by a library that is not installed",
    "HDFStore": "a path read by a library that is not installed",
    "read_feather": "a path read by a library that is not installed",
    "read_orc": "a path read by a library that is not installed",
    "read_parquet": "a path read by a library that is not installed",
    "read_iceberg": "a catalog or path read by a library that is not installed",
    "read_sas": "a path (not offered through the workspace)",
    "read_spss": "a path read by a library that is not installed",
    "read_stata": "a path (not offered through the workspace)",
    "ExcelFile": "holds a path or an open file (read_excel reads workspace files)",
    "ExcelWriter": "holds a path or an open file (to_excel writes workspace files)",
    "set_option": "process-wide options that outlive the block (plotting.backend imports by name)",
    "get_option": "reads the process-wide options (none can be set)",
    "reset_option": "process-wide options",
    "describe_option": "prints the options' documentation",
    "option_context": "changes process-wide options, plotting.backend included",
    "options": "the process-wide options object",
    "set_eng_float_format": "changes a process-wide display option",
    "show_versions": "prints the host's platform and installed packages",
    "test": "runs the library's test suite",
}
"""pandas members sandbox code does not get, and why."""

_PATH_READERS = {
    "read_csv": "filepath_or_buffer",
    "read_table": "filepath_or_buffer",
    "read_fwf": "filepath_or_buffer",
    "read_json": "path_or_buf",
}


def _reader(function: Callable[..., Any], name: str, files: WorkspaceFiles) -> Callable[..., Any]:
    keyword = _PATH_READERS[name]

    def read(*args: Any, **kwargs: Any) -> Any:
        if args:
            source, rest = args[0], args[1:]
        elif keyword in kwargs:
            source, rest = kwargs.pop(keyword), ()
        else:
            raise TypeError(f"{name}() needs a file name")
        encoding = kwargs.get("encoding") or "utf-8"
        raw = files.read(source, name)
        buffer = io.StringIO(raw.decode(encoding, errors=kwargs.get("encoding_errors", "strict")))
        kwargs.pop("encoding", None)
        return function(buffer, *rest, **kwargs)

    read.__name__ = read.__qualname__ = name
    read.__doc__ = f"pandas.{name} on a file of the workspace (read through the host)."
    return read


def _read_excel(pandas: types.ModuleType, files: WorkspaceFiles) -> Callable[..., Any]:
    def read_excel(io_: Any = None, /, *args: Any, **kwargs: Any) -> Any:
        source = kwargs.pop("io", io_)
        if source is None:
            raise TypeError("read_excel() needs a file name")
        raw = files.read(source, "read_excel")
        return pandas.read_excel(io.BytesIO(raw), *args, **kwargs)

    read_excel.__doc__ = "pandas.read_excel on a workbook of the workspace (through the host)."
    return read_excel


def pandas_members(pandas: types.ModuleType, files: WorkspaceFiles) -> Members:
    """The members of the sandbox's ``pandas``."""
    members: Members = {
        name: getattr(pandas, name)
        for name in sorted(vars(pandas))
        if not name.startswith("_")
        and name not in REMOVED
        and not isinstance(getattr(pandas, name), types.ModuleType)
    }
    for name in _PATH_READERS:
        members[name] = _reader(getattr(pandas, name), name, files)
    members["read_excel"] = _read_excel(pandas, files)
    return members


def restrict_plot_backend(pandas: types.ModuleType) -> None:
    """Make pandas' plotting accept only its matplotlib backend (never a module by name)."""
    from pandas.plotting import _core

    real: Callable[..., Any] = _core._get_plot_backend

    def matplotlib_only(backend: Any = None) -> Any:
        if backend not in (None, "matplotlib"):
            raise ValueError("only the matplotlib plotting backend is available in the sandbox")
        return real("matplotlib")

    _core._get_plot_backend = matplotlib_only
