"""numpy, pandas and matplotlib in a real (confined, forked) worker: imports, the idioms the
guards now allow, seeded randomness, BLAS under the thread limit, figures, and a zygote that
still forks after its warm-up plot."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cove.config import SandboxSettings
from cove.environment.sandbox.host.client import SandboxClient
from cove.environment.sandbox.host.pool import WorkerPool
from cove.environment.sandbox.worker.runtime import Runtime
from tests.environment.conftest import ok, read_proc, run, with_libraries


@pytest.fixture
def sandbox_settings(tmp_path: Path) -> SandboxSettings:
    """With the data libraries loaded: escapes and data work must face them."""
    return with_libraries(tmp_path)


FRAME = "import pandas as pd\ndf = pd.DataFrame({'x': [1, 2, 3], 'y': [4.0, 5.0, 6.0]})"


async def test_dotted_and_from_imports_of_the_curated_submodules(client: SandboxClient) -> None:
    code = (
        "import matplotlib.pyplot as plt\nimport numpy.linalg as la\nimport numpy.random\n"
        "from numpy import fft\nfrom numpy.lib.stride_tricks import sliding_window_view\n"
        "(float(la.det(numpy.eye(2))), len(fft.rfft([1.0, 2.0])), "
        "sliding_window_view(numpy.arange(4), 2).shape, plt.get_fignums())"
    )
    assert (await ok(client, code)).result.result_preview == "(1.0, 2, (3, 2), [])"
    refusals = (
        "import numpy.ctypeslib", "import numpy._core", "import pandas.io",
        "from numpy.lib.stride_tricks import as_strided", "import matplotlib.style",
    )  # fmt: skip
    for refused in refusals:
        outcome = await run(client, refused)
        assert not outcome.result.ok, refused


def test_without_the_libraries_an_import_says_how_to_install_them() -> None:
    runtime = Runtime(request=lambda f: f, output_limit=500, snapshot_limit=1000, libraries=False)
    reply = runtime.execute("import pandas as pd", 1, 0.0)
    assert reply["error"] == (
        "ImportError: pandas is not installed in this sandbox (cove was installed without its "
        "data extra: pip install 'cove[data]') (line 1)"
    )


async def test_augmented_assignment_to_items_and_attributes(client: SandboxClient) -> None:
    code = (
        FRAME + "\ndf['x'] += 10\ndf.loc[0, 'y'] *= 2\n"
        "import numpy as np\narr = np.zeros((2, 3))\narr[:, 1] += 10\narr[0] -= 1\n"
        "class Counter:\n    def __init__(self):\n        self.n = 0\nc = Counter()\nc.n += 5\n"
        "items = [1, 2]\nitems[-1] **= 3\n(df['x'].tolist(), df['y'].tolist(), c.n, items)"
    )
    assert (await ok(client, code)).result.result_preview == (
        "([11, 12, 13], [8.0, 5.0, 6.0], 5, [1, 8])"
    )
    outcome = await ok(client, "arr.tolist()")
    assert outcome.result.result_preview == "[[-1.0, 9.0, -1.0], [0.0, 10.0, 0.0]]"


async def test_label_attributes_are_writable_and_nothing_else_of_a_library_object(
    client: SandboxClient,
) -> None:
    code = (
        FRAME + "\ndf.columns = ['a', 'b']\ndf.index = ['p', 'q', 'r']\ns = df['a']\n"
        "s.name = 'renamed'\ndf.index.name = 'row'\n(list(df.columns), s.name, df.index.name)"
    )
    assert (await ok(client, code)).result.result_preview == "(['a', 'b'], 'renamed', 'row')"
    for refused in ("df.attrs = {}", "df.shape = (1, 1)", "df.a.values.flags.writeable = True",
                    "import numpy as np\nnp.zeros(2).shape = (1, 2)", "df.b += 1"):  # fmt: skip
        outcome = await run(client, refused)
        assert not outcome.result.ok, refused
        assert "cannot set attribute" in (outcome.result.error or ""), outcome.result.error


async def test_pandas_plots_only_through_matplotlib(client: SandboxClient) -> None:
    outcome = await run(client, FRAME + "\ndf.plot(backend='os')")
    assert "only the matplotlib plotting backend" in (outcome.result.error or "")
    drawn = await ok(client, FRAME + "\nax = df.plot(x='x', y='y', title='xy')\nax.get_title()")
    assert drawn.result.result_preview == "'xy'" and len(drawn.result.figures) == 1


async def test_random_numbers_follow_the_block_seed(client: SandboxClient) -> None:
    code = (
        "import numpy as np\nimport pandas as pd\n"
        "(np.random.normal(size=2).round(6).tolist(), np.random.default_rng().integers(0, 99), "
        "pd.DataFrame({'v': range(10)}).sample(3).v.tolist())"
    )
    first = (await run(client, code, seed=11)).result.result_preview
    again = (await run(client, code, seed=11)).result.result_preview
    other = (await run(client, code, seed=12)).result.result_preview
    assert first == again != other


async def test_a_matrix_product_runs_under_the_worker_thread_limit(client: SandboxClient) -> None:
    code = "import numpy as np\na = np.ones((400, 400))\nfloat((a @ a).sum())"
    outcome = await ok(client, code, timeout_s=30.0)
    assert outcome.result.result_preview == "64000000.0"


async def test_every_open_figure_is_rendered_when_the_block_ends(client: SandboxClient) -> None:
    code = (
        "import matplotlib.pyplot as plt\nfig, ax = plt.subplots(figsize=(4, 2))\n"
        "ax.plot([1, 2, 3])\nax.set_title('one')\nax.set_xlabel('t')\n"
        "plt.figure(figsize=(3, 3))\nplt.bar(['a', 'b'], [1, 2])\nplt.suptitle('two')\nplt.show()\n"
        "plt.rcParams['lines.linewidth'] = 9.0"
    )
    figures = (await ok(client, code)).result.figures
    assert [(f.width, f.height, f.title) for f in figures] == [(400, 200, "one"), (300, 300, "two")]
    assert figures[0].axes[0].xlabel == "t" and figures[0].png is not None
    assert figures[0].png.startswith(b"\x89PNG")
    after = await ok(client, "import matplotlib.pyplot as plt\n(plt.get_fignums(), "
                     "plt.rcParams['lines.linewidth'])")  # fmt: skip
    assert after.result.result_preview == "([], 1.5)"  # closed, and styling did not outlive it
    assert after.result.figures == ()


async def test_the_same_figure_gives_the_same_bytes(client: SandboxClient) -> None:
    code = "import matplotlib.pyplot as plt\nplt.plot([3, 1, 2])\nplt.title('same')"
    first, second = (await ok(client, code)).result.figures, (await ok(client, code)).result.figures
    assert first[0].digest == second[0].digest


async def test_a_worker_forks_after_the_zygotes_warm_up_plot(
    pool: WorkerPool, tmp_path: Path
) -> None:
    zygote = pool._zygote
    assert zygote is not None and zygote.alive
    client = await pool.acquire(workspace=tmp_path / "w", on_call=lambda *a: None)  # type: ignore[arg-type,return-value]
    stat = read_proc(client.pid or 0, "stat").decode()
    assert int(stat[stat.rindex(")") + 2 :].split()[1]) == zygote.pid  # forked, not cold
    open_files = [
        os.readlink(f"/proc/{zygote.pid}/fd/{fd}") for fd in os.listdir(f"/proc/{zygote.pid}/fd")
    ]
    assert not [name for name in open_files if name.endswith((".ttf", ".otf", ".afm"))]
    assert (
        await ok(client, "import numpy as np\nint(np.arange(5).sum())")
    ).result.result_preview == "10"


def test_c_code_imports_get_the_real_library_modules_and_nothing_else() -> None:
    runtime = Runtime(request=lambda f: f, output_limit=500, snapshot_limit=1000)
    importer = runtime.builtins["__import__"]
    namespace = runtime.namespace
    # What PyImport_Import passes: an empty list, never produced by an import statement.
    methods = importer("numpy._core._methods", namespace, namespace, [], 0)
    assert methods.__name__ == "numpy._core._methods"
    for refused in ("os", "subprocess", "ctypes", "builtins"):
        with pytest.raises(ImportError):
            importer(refused, namespace, namespace, [], 0)
    with pytest.raises(ImportError):  # the statement form: sandbox code naming it
        importer("numpy._core._methods", namespace, namespace, None, 0)
    reply = runtime.execute("import numpy as np\nfloat(np.arange(4.0).mean())", 1, 0.0)
    assert reply["value_preview"] == "1.5"


class _Hostile:
    """A foreign object (not sandbox-made) whose class lookup raises."""

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        raise RuntimeError("no class for you")


def test_the_tracker_records_what_it_cannot_handle_as_opaque_and_never_raises() -> None:
    runtime = Runtime(request=lambda f: f, output_limit=500, snapshot_limit=1000)
    runtime.namespace["hostile"] = _Hostile()
    reply = runtime.execute("x = 1\nhostile", 1, 0.0)
    kinds = {change["name"]: change["kind"] for change in reply["changes"]}
    assert kinds == {"x": "value", "hostile": "opaque"}
