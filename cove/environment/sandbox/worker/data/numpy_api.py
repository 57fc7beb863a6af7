"""The curated ``numpy`` namespaces: ``numpy``, ``numpy.linalg``, ``numpy.fft``, ``numpy.random``
and ``numpy.lib.stride_tricks`` (its bounds-checked ``sliding_window_view`` only).

Every public function, type and constant of ``numpy`` is handed out except what reaches raw memory
(``ctypeslib``, ``frombuffer`` on other buffers than ``bytes``, ``ndarray(buffer=...)``,
``from_dlpack``, ``recarray``), runs pickle or touches paths (``load``/``save`` and the text
readers and writers become workspace files through the host, with ``allow_pickle=False``;
``memmap``, ``fromfile``, ``fromregex`` are gone), changes process-wide state (``seterr``,
``seterrcall``, ``setbufsize``, ``set_printoptions``) or reads the caller's frame (``bmat``, and
``r_``/``c_`` with a string key, which look names up in whatever frame called them).

Submodules are not members unless curated here; members are read from the module's own
dictionary, never through its lazy ``__getattr__`` (which would import a submodule a sealed worker
cannot read). ``numpy.random`` draws from one ``Generator`` reseeded from each block's recorded
seed, so a replay draws the same numbers; ``default_rng()`` without a seed derives one from it.
Nothing seeds numpy's global state.
"""

from __future__ import annotations

import io
import types
from collections.abc import Callable
from typing import Any

from cove.environment.sandbox.worker.data.files import WorkspaceFiles

Members = dict[str, Any]

REMOVED = {
    "ctypeslib": "raw memory and C calls (c_intp.from_address, load_library)",
    "from_dlpack": "an array over memory described by a capsule",
    "fromfile": "reads a path or an open file",
    "fromregex": "reads a path or an open file",
    "memmap": "maps a file into memory",
    "recarray": "takes a raw buffer, offset and strides",
    "bmat": "looks names up in the calling frame's globals",
    "seterr": "process-wide error handling that outlives the block (errstate is scoped)",
    "seterrcall": "a process-wide error callback that outlives the block",
    "setbufsize": "process-wide buffer size",
    "set_printoptions": "process-wide print options (printoptions is scoped)",
    "info": "prints documentation read from the installed sources",
    "show_config": "prints the build and host configuration",
    "show_runtime": "prints the host's CPU and thread-pool details",
    "get_include": "a host path",
    "test": "runs the library's test suite",
}
"""numpy members sandbox code does not get, and why."""

_RANDOM_METHODS = (
    "beta", "binomial", "bytes", "chisquare", "choice", "dirichlet", "exponential", "f", "gamma",
    "geometric", "gumbel", "hypergeometric", "integers", "laplace", "logistic", "lognormal",
    "logseries", "multinomial", "multivariate_normal", "negative_binomial",
    "noncentral_chisquare", "noncentral_f", "normal", "pareto", "permutation", "poisson",
    "power", "random", "rayleigh", "shuffle", "standard_cauchy", "standard_exponential",
    "standard_gamma", "standard_normal", "standard_t", "triangular", "uniform", "vonmises",
    "wald", "weibull", "zipf", "permuted",
)  # fmt: skip


class BlockGenerator:
    """numpy's random numbers for sandbox code: one ``Generator`` per block, from its seed."""

    def __init__(self, numpy: types.ModuleType) -> None:
        self._numpy = numpy
        self._seed = 0
        self._generator: Any = None

    def seed(self, seed: int) -> None:
        """Start the block's stream (called with the block's recorded seed)."""
        self._seed, self._generator = seed, None

    @property
    def generator(self) -> Any:
        """The block's ``Generator``, made when the block first draws."""
        if self._generator is None:
            self._generator = self._numpy.random.default_rng(self._seed)
        return self._generator

    def default_rng(self, seed: Any = None) -> Any:
        """A new ``Generator``; without a seed its seed is drawn from the block's stream."""
        if seed is None:
            seed = int(self.generator.integers(0, 2**63))
        return self._numpy.random.default_rng(seed)

    def members(self) -> Members:
        """The ``numpy.random`` namespace: the Generator API and the legacy function names."""
        kind = self._numpy.random.Generator
        members: Members = {
            name: self._delegate(name) for name in _RANDOM_METHODS if hasattr(kind, name)
        }
        gen = self._delegate
        members.update(
            default_rng=self.default_rng,
            Generator=self._numpy.random.Generator,
            seed=self.seed,
            rand=lambda *shape: gen("random")(shape or None),
            randn=lambda *shape: gen("standard_normal")(shape or None),
            randint=lambda low, high=None, size=None, dtype=int: gen("integers")(
                low, high, size, dtype
            ),
            random_sample=gen("random"),
            sample=gen("random"),
            ranf=gen("random"),
        )
        return members

    def _delegate(self, name: str) -> Callable[..., Any]:
        def draw(*args: Any, **kwargs: Any) -> Any:
            return getattr(self.generator, name)(*args, **kwargs)

        draw.__name__ = draw.__qualname__ = name
        return draw


class _Concatenator:
    """``r_``/``c_`` without the string form that evaluates names in the calling frame."""

    __slots__ = ("_real",)

    def __init__(self, real: Any) -> None:
        self._real = real

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            raise TypeError("the matrix string form of r_/c_ is not available in the sandbox")
        return self._real[key]

    def __len__(self) -> int:
        return 0

    def __repr__(self) -> str:
        return "<index concatenator>"


def _array_type(numpy: types.ModuleType) -> type:
    """``numpy.ndarray`` for ``isinstance`` checks, whose constructor takes no raw buffer."""
    real = numpy.ndarray

    class ArrayType(type):
        def __instancecheck__(cls, instance: Any) -> bool:
            return isinstance(instance, real)

        def __subclasscheck__(cls, subclass: Any) -> bool:
            return isinstance(subclass, type) and issubclass(subclass, real)

        def __call__(cls, shape: Any, dtype: Any = float, *args: Any, **kwargs: Any) -> Any:
            if args or set(kwargs) - {"order"}:
                raise TypeError(
                    "ndarray() takes only shape, dtype and order in the sandbox (no buffer, "
                    "offset or strides): use numpy.empty, zeros or array"
                )
            return real(shape, dtype, order=kwargs.get("order", "C"))

    return ArrayType("ndarray", (), {"__module__": "numpy"})


def _load_and_save(numpy: types.ModuleType, files: WorkspaceFiles) -> Members:
    """``load`` and ``save`` of ``.npy``/``.npz`` workspace files, never with pickle."""

    def load(file: Any, mmap_mode: Any = None, allow_pickle: bool = False, **kwargs: Any) -> Any:
        if allow_pickle:
            raise ValueError("allow_pickle=True is not available in the sandbox")
        if mmap_mode is not None:
            raise ValueError("mmap_mode is not available in the sandbox")
        data = files.read(file, "load")
        result = numpy.load(io.BytesIO(data), allow_pickle=False, **kwargs)
        if isinstance(result, numpy.lib.npyio.NpzFile):
            with result:
                return {name: result[name] for name in result.files}
        return result

    def save(file: Any, arr: Any, allow_pickle: bool = False) -> None:
        if allow_pickle:
            raise ValueError("allow_pickle=True is not available in the sandbox")
        buffer = io.BytesIO()
        numpy.save(buffer, arr, allow_pickle=False)
        files.write(file, buffer.getvalue(), "save")

    return {"load": load, "save": save}


def _files_functions(numpy: types.ModuleType, files: WorkspaceFiles) -> Members:
    """``savez``/``loadtxt``/``savetxt``/``genfromtxt``/``frombuffer`` (bytes only)."""

    def archive(function: Callable[..., None], name: str) -> Callable[..., None]:
        def write(file: Any, *args: Any, **kwds: Any) -> None:
            if kwds.pop("allow_pickle", False):
                raise ValueError("allow_pickle=True is not available in the sandbox")
            buffer = io.BytesIO()
            function(buffer, *args, allow_pickle=False, **kwds)
            files.write(file, buffer.getvalue(), name)

        write.__name__ = write.__qualname__ = name
        return write

    def text_reader(function: Callable[..., Any], name: str) -> Callable[..., Any]:
        def read(fname: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(fname, list | tuple) and all(type(line) is str for line in fname):
                return function(list(fname), *args, **kwargs)  # lines given inline
            text = files.read(fname, name).decode(kwargs.pop("encoding", None) or "utf-8")
            return function(io.StringIO(text), *args, **kwargs)

        read.__name__ = read.__qualname__ = name
        return read

    def savetxt(fname: Any, X: Any, *args: Any, **kwargs: Any) -> None:
        buffer = io.StringIO()
        numpy.savetxt(buffer, X, *args, **kwargs)
        files.write(fname, buffer.getvalue(), "savetxt")

    def frombuffer(buffer: Any, dtype: Any = float, count: int = -1, offset: int = 0) -> Any:
        if type(buffer) is not bytes:
            raise TypeError("frombuffer() takes bytes in the sandbox")
        return numpy.frombuffer(buffer, dtype=dtype, count=count, offset=offset)

    return {
        **_load_and_save(numpy, files),
        "savez": archive(numpy.savez, "savez"),
        "savez_compressed": archive(numpy.savez_compressed, "savez_compressed"),
        "loadtxt": text_reader(numpy.loadtxt, "loadtxt"),
        "genfromtxt": text_reader(numpy.genfromtxt, "genfromtxt"),
        "savetxt": savetxt,
        "frombuffer": frombuffer,
    }


def numpy_members(
    numpy: types.ModuleType, files: WorkspaceFiles, submodules: dict[str, Any]
) -> Members:
    """The members of the sandbox's ``numpy``.

    Args:
        numpy: The real module.
        files: The workspace bridge for the file functions.
        submodules: The curated namespaces of ``linalg``, ``fft``, ``random`` and ``lib``.
    """
    members: Members = {
        name: getattr(numpy, name)
        for name in sorted(vars(numpy))
        if not name.startswith("_")
        and name not in REMOVED
        and not isinstance(getattr(numpy, name), types.ModuleType)
    }
    members.update(_files_functions(numpy, files))
    members["ndarray"] = _array_type(numpy)
    members["r_"] = _Concatenator(numpy.r_)
    members["c_"] = _Concatenator(numpy.c_)
    members.update(submodules)
    return members


def linalg_members(numpy: types.ModuleType) -> Members:
    """``numpy.linalg``: every public function (none touches memory, paths or global state)."""
    return {
        name: getattr(numpy.linalg, name)
        for name in sorted(vars(numpy.linalg))
        if not name.startswith("_") and name != "test"
    }


def fft_members(numpy: types.ModuleType) -> Members:
    """``numpy.fft``: every public function."""
    return {
        name: getattr(numpy.fft, name)
        for name in sorted(vars(numpy.fft))
        if not name.startswith("_") and name != "test"
    }


def stride_tricks_members(numpy: types.ModuleType) -> Members:
    """``numpy.lib.stride_tricks``: only the bounds-checked ``sliding_window_view``."""
    return {"sliding_window_view": numpy.lib.stride_tricks.sliding_window_view}
