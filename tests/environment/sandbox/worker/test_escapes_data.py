"""Escapes through numpy, pandas and matplotlib: raw memory, pickle, string evaluation, global
state that outlives a block, paths.

Each attack is shown succeeding against the libraries added naively (every public member handed
out, no attribute surface: ``naive_runtime.py``, in a process of its own), then failing in the
real runtime (in this process) and in a confined worker, which survives with its state intact.
An attack succeeds when its last block's value is ``'escaped'``. (``fromfile``/``tofile`` are
refused too, but need no attack here: numpy's C code opens a path with the builtins' ``open``,
which the sandbox does not have.)
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cove.environment.sandbox.host.client import SandboxClient
from cove.environment.sandbox.worker.runtime import Runtime
from tests.environment.conftest import library_fixtures, ok, run

pool, client = library_fixtures()


IMPORTS = "import numpy as np\nimport pandas as pd\nimport matplotlib.pyplot as plt\n"
FRAME = IMPORTS + "df = pd.DataFrame({'a': [1, 2], 'b': [3.0, 4.0]})\n"


class Evil:
    """Pickled into the attack files: unpickling it calls ``eval``."""

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (eval, ("6*7",))


# name -> blocks; {dir} is a directory holding the attack files.
ATTACKS: dict[str, list[str]] = {
    "as_strided reads past an array's end": [
        # Never bound to a name: tracking it would read (and crash on) the memory past the end.
        IMPORTS + "from numpy.lib.stride_tricks import as_strided\n"
        "'escaped' if as_strided(np.zeros(1), shape=(9,), strides=(8,))[8] is not None else 0",
    ],
    "ctypeslib reads memory at an address": [
        IMPORTS + "a = np.array([42])\n"
        "'escaped' if np.ctypeslib.c_intp.from_address(a.ctypes.data).value == 42 else 0",
    ],
    "ndarray.ctypes hands out addresses": [
        IMPORTS + "'escaped' if np.zeros(1).ctypes.data > 0 else 0",
    ],
    "ndarray over a raw buffer": [
        IMPORTS + "'escaped' if np.ndarray((2,), dtype='u1', buffer=b'ab')[1] == 98 else 0",
    ],
    "frombuffer on another buffer": [
        IMPORTS + "a = np.zeros(2)\n'escaped' if len(np.frombuffer(a.data, dtype='u1')) else 0",
    ],
    "np.load runs pickle": [
        IMPORTS + "'escaped' if np.load('{dir}/evil.npy', allow_pickle=True)[0] == 42 else 0",
    ],
    "read_pickle runs pickle": [
        IMPORTS + "'escaped' if pd.read_pickle('{dir}/evil.pkl') == 42 else 0",
    ],
    "ndarray.dumps pickles": [IMPORTS + "'escaped' if np.zeros(1).dumps() else 0"],
    "pd.eval reaches module globals": [
        FRAME + "g = pd.eval('df.__class__.__init__.__globals__', local_dict={'df': df})\n"
        "'escaped' if '__builtins__' in g else 0",
    ],
    "DataFrame.eval reaches module globals": [
        FRAME + "g = df.eval('a.__class__.__init__.__globals__')\n"
        "'escaped' if '__builtins__' in g else 0",
    ],
    "DataFrame.query evaluates strings": [
        FRAME + "rows = df.query('a > a.__class__.__init__.__code__.co_argcount - 100')\n"
        "'escaped' if len(rows) == 2 else 0",
    ],
    "agg looks eval up by name": [
        FRAME + "g = df.agg('eval', expr='a.__class__.__init__.__globals__')\n"
        "'escaped' if '__builtins__' in g else 0",
    ],
    "accessor registration outlives the block": [
        FRAME + "class Geo:\n    def __init__(self, frame):\n        self.frame = frame\n"
        "pd.api.extensions.register_dataframe_accessor('geo')(Geo)",
        "'escaped' if hasattr(pd.DataFrame(), 'geo') else 0",
    ],
    "set_option outlives the block": [
        IMPORTS + "pd.set_option('display.max_rows', 3)",
        "'escaped' if pd.get_option('display.max_rows') == 3 else 0",
    ],
    "seterrcall outlives the block": [
        IMPORTS + "def spy(kind, flag):\n    pass\nnp.seterrcall(spy)",
        "'escaped' if np.geterrcall() is not None else 0",
    ],
    "rcParams outlive the block": [
        IMPORTS + "plt.rcParams['lines.linewidth'] = 7.0",
        "'escaped' if plt.rcParams['lines.linewidth'] == 7.0 else 0",
    ],
    "matplotlib.use switches the backend": [
        IMPORTS + "import matplotlib\nmatplotlib.use('svg', force=True)\n"
        "'escaped' if matplotlib.get_backend() == 'svg' else 0",
    ],
    "a style file is read by path": [
        IMPORTS + "plt.style.use('{dir}/evil.mplstyle')\n"
        "'escaped' if plt.rcParams['lines.linewidth'] == 9.0 else 0",
    ],
    "rc_file reads a path": [
        IMPORTS + "import matplotlib\nmatplotlib.rc_file('{dir}/evil.mplstyle')\n"
        "'escaped' if plt.rcParams['lines.linewidth'] == 9.0 else 0",
    ],
    "memmap maps a path": [
        IMPORTS + "'escaped' if len(np.memmap('{dir}/data.bin', dtype='u1', mode='r')) else 0",
    ],
    "to_pickle writes a path": [FRAME + "df.to_pickle('{out}/written.pkl')\n'escaped'"],
    "DataFrame.style renders templates": [FRAME + "'escaped' if df.style.to_html() else 0"],
    "a plotting backend imported by name": [
        FRAME + "pd.set_option('plotting.backend', 'matplotlib')\n'escaped'",
    ],
}


@pytest.fixture(scope="module")
def attack_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("attacks")
    np.save(where / "evil.npy", np.array([Evil()], dtype=object), allow_pickle=True)
    (where / "evil.pkl").write_bytes(pickle.dumps(Evil()))
    (where / "evil.mplstyle").write_text("lines.linewidth: 9.0\n")
    (where / "data.bin").write_bytes(b"\x01\x02\x03\x04")
    return where


def blocks(name: str, where: Path, out: Path) -> list[str]:
    """The attack's blocks: files read from ``where``, written to ``out``."""
    return [code.replace("{dir}", str(where)).replace("{out}", str(out)) for code in ATTACKS[name]]


@pytest.fixture(scope="module")
def naive_results(attack_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Every attack run against the naive libraries, in a process of its own."""
    names = list(ATTACKS)
    out = tmp_path_factory.mktemp("naive-writes")
    result = subprocess.run(
        [sys.executable, "-m", "tests.environment.sandbox.worker.naive_runtime"],
        input=json.dumps([blocks(name, attack_dir, out) for name in names]),
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).parents[4],
        env={**os.environ, "MPLBACKEND": "Agg"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return dict(zip(names, json.loads(result.stdout), strict=True))


@pytest.mark.parametrize("name", list(ATTACKS))
def test_the_attack_succeeds_against_the_naive_libraries(
    name: str, naive_results: dict[str, str]
) -> None:
    assert naive_results[name] == "'escaped'", naive_results[name]


@pytest.mark.parametrize("name", list(ATTACKS))
def test_the_attack_fails_in_the_runtime(name: str, attack_dir: Path, tmp_path: Path) -> None:
    runtime = Runtime(request=lambda frame: frame, output_limit=2_000, value_limit=100_000)
    outcome = ""
    for code in blocks(name, attack_dir, tmp_path):
        reply = runtime.execute(code, 7, 1_700_000_000.0)
        outcome = str(reply["value_preview"]) if reply["ok"] else f"raised {reply['error']}"
        if not reply["ok"]:
            break
    assert outcome != "'escaped'"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize("name", list(ATTACKS))
async def test_the_attack_fails_in_a_confined_worker(
    name: str, client: SandboxClient, attack_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    out.mkdir(mode=0o777)
    await ok(client, "canary = [1, 2, 3]")
    pid = client.pid
    outcome = None
    for code in blocks(name, attack_dir, out):
        outcome = await run(client, code, timeout_s=30.0)
        if not outcome.result.ok:
            break
    assert outcome is not None
    assert outcome.result.result_preview != "'escaped'", outcome.result
    assert outcome.restart is None and client.pid == pid
    assert (await ok(client, "sum(canary)")).result.result_preview == "6"
    assert list(out.iterdir()) == []
