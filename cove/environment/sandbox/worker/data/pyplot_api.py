"""The curated ``matplotlib`` namespaces: ``matplotlib.pyplot`` (and the ``matplotlib`` package
holding it), ``matplotlib.dates``, ``matplotlib.ticker`` and ``matplotlib.colors``.

Only the Agg backend exists in a worker. Refused: choosing a backend (``switch_backend``,
``rcParams['backend']``: ``module://name`` imports any module), LaTeX and external programs
(``text.usetex``, animation writers, the PostScript distiller), style and rc files by path,
interactive functions, and the module-wide defaults (``rcParamsDefault``). ``rcParams`` is a view
whose writes are limited to styling keys, and what a block changes is put back when it ends
(``figures.py``), so styling never outlives the block that set it. ``savefig``/``imsave``/
``imread`` name workspace files, written and read through the host; ``show`` only marks the
figures of the block, which are all rendered when it ends.
"""

from __future__ import annotations

import io
import types
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from cove.environment.sandbox.worker.data.files import WorkspaceFiles

Members = dict[str, Any]

KEPT = """
Annotation Arrow Artist AutoLocator AxLine Axes Button Circle Colorizer ColorizingArtist
Colormap Figure FixedFormatter FixedLocator FormatStrFormatter Formatter FuncFormatter GridSpec
IndexLocator Line2D LinearLocator Locator LogFormatter LogFormatterExponent LogFormatterMathtext
LogLocator MaxNLocator MultipleLocator Normalize NullFormatter NullLocator PolarAxes Polygon
Rectangle ScalarFormatter Slider Subplot SubplotSpec Text TickHelper Widget acorr angle_spectrum
annotate arrow autoscale autumn axes axhline axhspan axis axline axvline axvspan bar bar_label
barbs barh bone box boxplot broken_barh cla clabel clf clim close cohere color_sequences
colorbar colormaps contour contourf cool copper csd cycler delaxes draw ecdf errorbar eventplot
figaspect figimage figlegend fignum_exists figtext figure fill fill_between fill_betweenx
findobj flag gca gcf gci get get_cmap get_figlabels get_fignums get_plot_commands
get_scale_names getp gray grid grouped_bar hexbin hist hist2d hlines hot hsv imshow inferno jet
legend locator_params loglog magma magnitude_spectrum margins matshow minorticks_off
minorticks_on nipy_spectral pcolor pcolormesh phase_spectrum pie pie_label pink plasma plot
polar prism psd quiver quiverkey rgrids sca scatter sci semilogx semilogy set_cmap setp specgram
spring spy stackplot stairs stem step streamplot subplot subplot2grid subplot_mosaic subplots
subplots_adjust summer suptitle table text thetagrids tick_params ticklabel_format tight_layout
title tricontour tricontourf tripcolor triplot twinx twiny violinplot viridis vlines winter
xcorr xkcd xlabel xlim xscale xticks ylabel ylim yscale yticks
""".split()  # noqa: SIM905 - a word list reads better than a list literal
"""pyplot members handed out as they are: figures, axes, artists and drawing functions."""

REMOVED = {
    "switch_backend": "imports a backend module by name",
    "backend_registry": "imports backend modules by name",
    "get_backend": "names the host's backend machinery (always Agg here)",
    "new_figure_manager": "backend machinery",
    "get_current_fig_manager": "backend machinery (window managers)",
    "draw_if_interactive": "backend machinery",
    "draw_all": "backend machinery",
    "install_repl_displayhook": "changes the interpreter's display hook",
    "uninstall_repl_displayhook": "changes the interpreter's display hook",
    "ion": "interactive mode (no display in a worker)",
    "ioff": "interactive mode (no display in a worker)",
    "interactive": "interactive mode (no display in a worker)",
    "isinteractive": "interactive mode (no display in a worker)",
    "pause": "runs the GUI event loop",
    "ginput": "waits for mouse clicks",
    "waitforbuttonpress": "waits for input",
    "connect": "GUI event callbacks",
    "disconnect": "GUI event callbacks",
    "subplot_tool": "a GUI tool window",
    "rcParamsDefault": "module-wide defaults every later block would inherit",
    "rcParamsOrig": "module-wide defaults every later block would inherit",
    "rcdefaults": "resets to the module-wide defaults (a block's rc changes end with it anyway)",
    "set_loglevel": "the host's logging configuration",
    "AbstractContextManager": "a typing helper re-exported by pyplot",
    "BackendFilter": "backend machinery",
    "Enum": "the stdlib enum base re-exported by pyplot (enum is its own module)",
    "ExitStack": "contextlib re-exported by pyplot",
    "FigureBase": "a base class (Figure is kept)",
    "FigureCanvasBase": "canvases print to paths (print_figure)",
    "FigureManagerBase": "backend machinery",
    "IO": "a typing helper re-exported by pyplot",
    "MouseButton": "GUI events",
    "TYPE_CHECKING": "a typing flag",
    "annotations": "a __future__ flag",
    "cast": "a typing helper",
    "overload": "a typing helper",
    "rc_file": "reads an rc file by path",
}
"""pyplot members sandbox code does not get, and why (wrapped ones are in ``pyplot_members``)."""

_DENIED_RC_GROUPS = frozenset(
    {"backend", "backend_fallback", "interactive", "toolbar", "timezone", "webagg", "tk",
     "macosx", "keymap", "animation", "pgf", "ps", "path", "docstring", "_internal"}
)  # fmt: skip
_DENIED_RC_KEYS = frozenset({"text.usetex", "text.latex.preamble", "savefig.directory"})


def check_rc_key(key: object) -> str:
    """``key`` when sandbox code may set that rc parameter, else a refusal."""
    if type(key) is not str:
        raise TypeError("rc parameter names are strings")
    if key in _DENIED_RC_KEYS or key.split(".")[0] in _DENIED_RC_GROUPS:
        raise KeyError(f"rc parameter {key!r} cannot be set in the sandbox")
    return key


class RcParams:
    """``rcParams`` as the sandbox sees it: reads of every key, writes of styling keys only."""

    __slots__ = ("_real",)

    def __init__(self, real: Any) -> None:
        self._real = real

    def __getitem__(self, key: str) -> Any:
        return self._real[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self._real[check_rc_key(key)] = value

    def __contains__(self, key: object) -> bool:
        return key in self._real

    def __iter__(self) -> Any:
        return iter(list(self._real))

    def __len__(self) -> int:
        return len(self._real)

    def get(self, key: str, default: Any = None) -> Any:
        """The value of ``key``, or ``default``."""
        return self._real.get(key, default)

    def keys(self) -> list[str]:
        """Every rc parameter name."""
        return list(self._real)

    def update(self, values: Mapping[str, Any] | None = None, **more: Any) -> None:
        """Set several styling keys."""
        for key, value in {**dict(values or {}), **more}.items():
            self[key] = value

    def __repr__(self) -> str:
        return "<rcParams>"


def _checked(values: Iterable[str]) -> None:
    for key in values:
        check_rc_key(key)


def pyplot_members(plt: types.ModuleType, files: WorkspaceFiles) -> Members:
    """The members of the sandbox's ``matplotlib.pyplot``."""
    members: Members = {name: getattr(plt, name) for name in KEPT if hasattr(plt, name)}
    members.update(
        rcParams=RcParams(plt.rcParams),
        rc=_rc(plt),
        rc_context=_rc_context(plt),
        savefig=lambda fname, *args, **kwargs: save_figure(
            plt.gcf(), fname, files, *args, **kwargs
        ),
        show=_show,
        imread=_imread(plt, files),
        imsave=_imsave(plt, files),
        style=_style_namespace(plt),
    )
    return members


def _rc(plt: types.ModuleType) -> Callable[..., None]:
    def rc(group: str, **kwargs: Any) -> None:
        groups = (group,) if isinstance(group, str) else tuple(group)
        _checked(f"{name}.{key}" for name in groups for key in kwargs)
        plt.rc(group, **kwargs)

    return rc


def _rc_context(plt: types.ModuleType) -> Callable[..., Any]:
    def rc_context(rc: Mapping[str, Any] | None = None, fname: Any = None) -> Any:
        if fname is not None:
            raise ValueError("rc_context(fname=...) reads a file: not available in the sandbox")
        _checked(dict(rc or {}))
        return plt.rc_context(rc=rc)

    return rc_context


def _show(*args: Any, **kwargs: Any) -> None:
    """Figures are shown when the block ends: every open figure is rendered and kept."""


def save_figure(figure: Any, fname: Any, files: WorkspaceFiles, *args: Any, **kwargs: Any) -> None:
    """Render ``figure`` and write it to workspace file ``fname`` through the host."""
    if kwargs.pop("metadata", None) is not None:
        raise ValueError("savefig(metadata=...) is not available in the sandbox")
    buffer = io.BytesIO()
    name = fname if isinstance(fname, str) else ""
    fmt = kwargs.pop("format", None) or (name.rsplit(".", 1)[-1].lower() if "." in name else "png")
    if fmt not in ("png", "svg", "pdf", "jpg", "jpeg"):
        raise ValueError(f"savefig(): format {fmt!r} is not available (png, svg, pdf, jpg)")
    figure.savefig(buffer, *args, format=fmt, metadata=_FIXED_METADATA.get(fmt), **kwargs)
    files.write(fname, buffer.getvalue(), "savefig")


_FIXED_METADATA: dict[str, dict[str, Any] | None] = {
    # No creation date or version: the same figure gives the same bytes (replay compares them).
    "png": {"Software": None},
    "svg": {"Date": None, "Creator": None},
    "pdf": {"CreationDate": None, "Creator": None, "Producer": None},
    "jpg": None,
    "jpeg": None,
}


def _imread(plt: types.ModuleType, files: WorkspaceFiles) -> Callable[..., Any]:
    def imread(fname: Any, format: str | None = None) -> Any:
        data = files.read(fname, "imread")
        kind = format or (fname.rsplit(".", 1)[-1].lower() if "." in fname else None)
        return plt.imread(io.BytesIO(data), format=kind)

    return imread


def _imsave(plt: types.ModuleType, files: WorkspaceFiles) -> Callable[..., None]:
    def imsave(fname: Any, arr: Any, **kwargs: Any) -> None:
        kwargs.pop("metadata", None)
        buffer = io.BytesIO()
        kind = kwargs.pop("format", None) or (
            fname.rsplit(".", 1)[-1].lower() if isinstance(fname, str) and "." in fname else "png"
        )
        plt.imsave(buffer, arr, format=kind, **kwargs)
        files.write(fname, buffer.getvalue(), "imsave")

    return imsave


def _style_namespace(plt: types.ModuleType) -> Any:
    from cove.environment.sandbox.worker.modules import ModuleNamespace

    style = plt.style
    available = tuple(style.available)

    def checked(name: Any) -> Any:
        names = [name] if isinstance(name, str | dict) else list(name)
        for item in names:
            if isinstance(item, dict):
                _checked(item)
            elif item not in available and item != "default":
                raise ValueError(f"style {item!r} is not one of matplotlib's styles: {available}")
        return name

    return ModuleNamespace(
        "matplotlib.pyplot.style",
        {
            "available": list(available),
            "use": lambda name: style.use(checked(name)),
            "context": lambda name, after_reset=False: style.context(checked(name), after_reset),
        },
    )


MODULE_REMOVED = {
    "set_epoch": "changes the date epoch of every later block",
    "colorConverter": "a shared converter whose cache outlives the block",
}
"""Members of ``matplotlib.colors``/``dates``/``ticker`` sandbox code does not get (besides
their mutable module-level tables: colour-name dicts every later block would see changed)."""


def public_members(module: types.ModuleType) -> Members:
    """Every public member of ``module`` but modules, mutable tables and ``MODULE_REMOVED``."""
    return {
        name: getattr(module, name)
        for name in sorted(vars(module))
        if not name.startswith("_")
        and name not in MODULE_REMOVED
        and not isinstance(getattr(module, name), types.ModuleType | dict | list | set)
    }
