"""Stand-ins for the library methods that take paths, print, draw random numbers or look up
functions by name.

- Writers (``to_csv``, ``to_excel``, ``to_json``, ``to_html``, ``to_string``) given a file name
  render into memory and write the bytes to the workspace through the host; without one they
  return their text as usual.
- ``info`` prints into the block's output (the library would print to the worker's stdout).
- ``sample`` without ``random_state`` draws from the block's generator (replay draws the same).
- ``agg``/``aggregate``/``apply``/``transform`` accept a function, or the name of one of a fixed
  set of reductions and transforms: pandas looks a name up with ``getattr`` on the object (then on
  numpy) and calls it with the remaining arguments, so ``df.agg('eval', ...)`` or
  ``df.apply('to_pickle', ...)`` would reach what the surface refuses.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

from cove.environment.sandbox.worker.data.files import WorkspaceFiles

FUNCTION_NAMES = frozenset(
    """
    all any bfill count cumcount cummax cummin cumprod cumsum describe diff ffill first head
    idxmax idxmin kurt kurtosis last max mean median min mode ngroup nlargest nsmallest nth
    nunique ohlc pct_change prod product quantile rank sem shift size skew std sum tail unique
    value_counts var abs round corr cov sort_values nanmean nansum nanmax nanmin nanstd
    nanmedian
    """.split()  # noqa: SIM905
)
"""The functions ``agg``/``apply``/``transform`` may name: reductions and transforms on data."""


def check_function(spec: Any) -> None:
    """Refuse a function specification naming anything outside ``FUNCTION_NAMES``.

    A specification is a callable, a name, a list of them, a dict of them (per column), or a
    ``(label, function)`` pair (named aggregation, ``NamedAgg``).

    Raises:
        ValueError: A name outside the allowed set.
    """
    if isinstance(spec, str):
        if spec not in FUNCTION_NAMES:
            raise ValueError(
                f"function name {spec!r} is not allowed here: pass a function, or one of "
                + ", ".join(sorted(FUNCTION_NAMES))
            )
    elif isinstance(spec, dict):
        for value in spec.values():
            check_function(value)
    elif isinstance(spec, tuple):
        if len(spec) == 2:
            check_function(spec[1])
    elif isinstance(spec, list):
        for item in spec:
            check_function(item)


def by_function_name(method: str) -> Callable[[Any], Callable[..., Any]]:
    """The maker of a stand-in for ``obj.<method>(func, ...)`` that checks ``func`` first."""

    def make(obj: Any) -> Callable[..., Any]:
        real = getattr(obj, method)

        def call(*args: Any, **kwargs: Any) -> Any:
            for value in (*args[:1], kwargs.get("func"), kwargs.get("arg")):
                check_function(value)
            for value in kwargs.values():
                if isinstance(value, tuple):
                    check_function(value)
            return real(*args, **kwargs)

        call.__name__ = call.__qualname__ = method
        call.__doc__ = getattr(real, "__doc__", None)
        return call

    return make


_WRITER_TARGETS = {
    "to_csv": ("path_or_buf", "text"),
    "to_json": ("path_or_buf", "text"),
    "to_html": ("buf", "text"),
    "to_string": ("buf", "text"),
    "to_excel": ("excel_writer", "bytes"),
}


def writer(method: str, files: WorkspaceFiles) -> Callable[[Any], Callable[..., Any]]:
    """The maker of a stand-in for a writer: a file name goes to the workspace via the host."""
    keyword, kind = _WRITER_TARGETS[method]

    def make(obj: Any) -> Callable[..., Any]:
        real = getattr(obj, method)

        def call(*args: Any, **kwargs: Any) -> Any:
            target = args[0] if args else kwargs.pop(keyword, None)
            rest = args[1:]
            if target is None:
                if kind == "bytes":
                    raise TypeError(f"{method}() needs a file name")
                return real(None, *rest, **kwargs)
            buffer: io.StringIO | io.BytesIO = io.StringIO() if kind == "text" else io.BytesIO()
            real(buffer, *rest, **kwargs)
            files.write(target, buffer.getvalue(), method)
            return None

        call.__name__ = call.__qualname__ = method
        call.__doc__ = f"{method} into a workspace file (through the host), or as text."
        return call

    return make


def info(output: Callable[[str], None]) -> Callable[[Any], Callable[..., Any]]:
    """The maker of ``info``: its report goes to the block's output."""

    def make(obj: Any) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> None:
            kwargs.pop("buf", None)
            buffer = io.StringIO()
            obj.info(*args, buf=buffer, **kwargs)
            output(buffer.getvalue())

        call.__name__ = call.__qualname__ = "info"
        return call

    return make


def sample(generator: Callable[[], Any]) -> Callable[[Any], Callable[..., Any]]:
    """The maker of ``sample``: without ``random_state``, draws from the block's generator."""

    def make(obj: Any) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            if len(args) < 4 and kwargs.get("random_state") is None:
                kwargs["random_state"] = generator()
            return obj.sample(*args, **kwargs)

        call.__name__ = call.__qualname__ = "sample"
        return call

    return make


def figure_method(method: str, files: WorkspaceFiles) -> Callable[[Any], Callable[..., Any]]:
    """The maker of ``Figure.savefig`` (to the workspace) and ``Figure.show`` (no-op)."""
    from cove.environment.sandbox.worker.data.pyplot_api import save_figure

    def make(figure: Any) -> Callable[..., Any]:
        if method == "show":
            return lambda *args, **kwargs: None

        def savefig(fname: Any, *args: Any, **kwargs: Any) -> None:
            save_figure(figure, fname, files, *args, **kwargs)

        return savefig

    return make


def clock_method(method: str, now: Callable[[], float]) -> Callable[[Any], Callable[..., Any]]:
    """The maker of ``Timestamp.now``/``today``: the block's recorded clock, not the real one."""

    def make(owner: Any) -> Callable[..., Any]:
        cls: Any = owner if isinstance(owner, type) else type(owner)

        def call(tz: Any = None) -> Any:
            stamp = cls.fromtimestamp(now(), tz="UTC")
            stamp = stamp.tz_convert(tz) if tz is not None else stamp.tz_convert(None)
            return stamp

        call.__name__ = call.__qualname__ = method
        return call

    return make
