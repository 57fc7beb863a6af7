"""A sandbox runtime with the data libraries added *naively*: every public member of numpy,
pandas and matplotlib (submodules as namespaces of their public members, recursively), no
attribute surface, no wrappers. What the escape tests show each attack succeeding against.

Run as ``python -m tests.environment.sandbox.worker.naive_runtime`` with a JSON list of attacks
(each a list of blocks) on stdin; prints one JSON list: per attack, the last block's value
preview, or ``"raised ..."`` when a block failed. A process of its own, so that what the attacks
change (options, accessors, error callbacks) never reaches the test process.
"""

from __future__ import annotations

import importlib
import json
import sys
import types
from typing import Any

from cove.environment.sandbox.worker.data import libraries
from cove.environment.sandbox.worker.modules import ModuleNamespace, ModuleTable
from cove.environment.sandbox.worker.runtime import Runtime

NAIVE_MODULES = {
    "numpy": "numpy",
    "pandas": "pandas",
    "matplotlib": "matplotlib",
    "matplotlib.pyplot": "matplotlib.pyplot",
    "numpy.lib": "numpy.lib",
    "numpy.lib.stride_tricks": "numpy.lib.stride_tricks",
}


def naive_namespace(name: str, module: types.ModuleType, depth: int = 0) -> ModuleNamespace:
    """Every public member of ``module``; submodules as namespaces in turn (a few levels)."""
    members: dict[str, Any] = {}
    for member in dir(module):
        if member.startswith("_"):
            continue
        value = getattr(module, member)
        if isinstance(value, types.ModuleType):
            if depth < 2 and value.__name__.startswith(module.__name__.split(".")[0]):
                members[member] = naive_namespace(f"{name}.{member}", value, depth + 1)
            continue
        members[member] = value
    return ModuleNamespace(name, members)


def naive_runtime() -> Runtime:
    """A runtime whose library modules are the naive namespaces and whose guards know nothing
    of the libraries (no surface, no wrappers)."""
    loaded = libraries.load()
    assert loaded is not None
    runtime = Runtime(request=lambda frame: frame, output_limit=2_000, value_limit=100_000,
                      libraries=False)  # fmt: skip
    real = {name: sys.modules[module] for name, module in NAIVE_MODULES.items()}
    builders = {name: _builder(name, module) for name, module in real.items()}
    runtime.modules = ModuleTable(runtime.chance, runtime.clock, builders)
    curated = runtime.modules.importer()

    def naive_import(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (),
                     level: int = 0) -> Any:  # fmt: skip
        if type(fromlist) is list and not fromlist:  # C code importing for itself: anything
            return importlib.import_module(name)
        return curated(name, globals, locals, fromlist, level)

    runtime.builtins["__import__"] = naive_import
    runtime.tracker.modules = runtime.modules
    return runtime


def _builder(name: str, module: types.ModuleType) -> Any:
    return lambda table: naive_namespace(name, module).members()


def attack(blocks: list[str]) -> str:
    """Run an attack's blocks in a fresh naive runtime; the last block's value or failure."""
    runtime = naive_runtime()
    found = ""
    for code in blocks:
        reply = runtime.execute(code, 7, 1_700_000_000.0)
        if not reply["ok"]:
            return f"raised {reply['error']}"
        found = str(reply["value_preview"])
    return found


if __name__ == "__main__":
    attacks = json.loads(sys.stdin.read())
    print(json.dumps([attack(blocks) for blocks in attacks]))
