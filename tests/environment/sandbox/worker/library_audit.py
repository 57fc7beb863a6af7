"""The audit verdicts the code gives the data libraries' names (``docs/sandbox-allowlist.md``,
section "Data libraries"): curated module members, class surfaces and writable attributes.

``python -m tests.environment.sandbox.worker.library_audit`` prints the section's rows (with the
reasons the code gives) after a change; the audit test checks the table against ``verdicts()``.
"""

from __future__ import annotations

import importlib
from typing import Any

from cove.environment.sandbox.worker.data import numpy_api, pandas_api, pyplot_api
from cove.environment.sandbox.worker.data.surface import LIBRARY_REMOVED, ROWS
from cove.environment.sandbox.worker.modules import DATA_MODULES
from cove.environment.sandbox.worker.runtime import Runtime

ABSENT = object()

_MODULE_REMOVED: dict[str, dict[str, str]] = {
    "numpy": numpy_api.REMOVED,
    "pandas": pandas_api.REMOVED,
    "matplotlib.pyplot": pyplot_api.REMOVED,
    "matplotlib.colors": {"colorConverter": pyplot_api.MODULE_REMOVED["colorConverter"]},
    "matplotlib.dates": {"set_epoch": pyplot_api.MODULE_REMOVED["set_epoch"]},
}


def rows() -> dict[str, tuple[str, str]]:
    """``name -> (verdict, why)`` for every data-library name the code decides about."""
    runtime = Runtime(request=lambda frame: frame, output_limit=100, value_limit=100)
    assert runtime.data is not None, "the data libraries are not installed"
    found: dict[str, tuple[str, str]] = {}
    for module in DATA_MODULES:
        real = importlib.import_module(module)
        for member, obj in runtime.modules.get(module).members().items():
            same = obj is getattr(real, member, ABSENT)
            found[f"{module}.{member}"] = (
                ("kept", "a library function, type or constant: computes on the data it is given")
                if same
                else ("wrapped", _wrapped_why(module, member, obj))
            )
        for member, why in _MODULE_REMOVED.get(module, {}).items():
            found[f"{module}.{member}"] = ("removed", why)
    for cls, surface in runtime.data.surfaces.by_class.items():
        public = {n for n in dir(cls) if not n.startswith("_")}
        if surface.rule is not None:
            found[f"{surface.path}.*"] = ("kept", surface.rule)
            names = set(surface.wrapped) | set(surface.removed) | (public & set(LIBRARY_REMOVED))
        else:
            names = public | set(surface.kept) | set(surface.wrapped) | set(surface.removed)
        for name in sorted(names):
            verdict = surface.verdict(name)
            found[f"{surface.path}.{name}"] = verdict or ("unaudited", "")
    found[f"{ROWS.path}.*"] = ("kept", ROWS.rule or "")
    for cls, names in runtime.data.surfaces.writable_pairs:
        path = runtime.data.surfaces.by_class[cls].path
        for name in sorted(names):
            found[f"{path}.{name}="] = ("kept", "sets labels: the one attribute write allowed")
    return found


def _wrapped_why(module: str, member: str, obj: Any) -> str:
    if module == "numpy.random":
        return "draws from the block's generator, seeded from the block's recorded seed"
    if type(obj).__name__ == "ModuleNamespace":
        return "a curated namespace (its members have rows of their own)"
    why = {
        "ndarray": "isinstance checks as usual; the constructor takes no buffer, offset or strides",
        "r_": "refuses the string form, which looks names up in the calling frame",
        "c_": "refuses the string form, which looks names up in the calling frame",
        "frombuffer": "takes bytes only (no other buffer object)",
        "rcParams": "writes limited to styling keys; what a block changes is put back when it ends",
        "rc": "keys limited to styling keys",
        "rc_context": "keys limited to styling keys; no fname",
        "show": "figures are rendered when the block ends",
        "style": "matplotlib's own styles by name only (no paths)",
    }.get(member)
    return why or "reads or writes a workspace file through the host (a name, never a path)"


if __name__ == "__main__":
    for name, (verdict, why) in sorted(rows().items()):
        print(f"| `{name}` | {verdict} | {why} |")
