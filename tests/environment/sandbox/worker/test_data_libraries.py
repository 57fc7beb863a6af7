"""numpy, pandas and matplotlib in a real (confined, forked) worker: imports, the idioms the
guards now allow, seeded randomness, BLAS under the thread limit, figures, and a zygote that
still forks after its warm-up plot."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import pytest

from cove.environment.sandbox.host.client import SandboxClient
from cove.environment.sandbox.host.pool import WorkerPool
from cove.environment.sandbox.worker.runtime import Runtime
from tests.environment.conftest import library_fixtures, ok, read_proc, run

pytestmark = pytest.mark.slow  # sandbox workers forked per test
IN_MODULE_LOOP = pytest.mark.asyncio(loop_scope="module")  # where the module's pool lives


pool, client = library_fixtures()


FRAME = "import pandas as pd\ndf = pd.DataFrame({'x': [1, 2, 3], 'y': [4.0, 5.0, 6.0]})"


@IN_MODULE_LOOP
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
    runtime = Runtime(request=lambda f: f, output_limit=500, value_limit=1000, libraries=False)
    reply = runtime.execute("import pandas as pd", 1, 0.0)
    assert reply["error"] == (
        "ImportError: pandas is not installed in this sandbox (cove was installed without its "
        "data extra: pip install 'cove[data]') (line 1)"
    )


@IN_MODULE_LOOP
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


@IN_MODULE_LOOP
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


@IN_MODULE_LOOP
async def test_pandas_plots_only_through_matplotlib(client: SandboxClient) -> None:
    outcome = await run(client, FRAME + "\ndf.plot(backend='os')")
    assert "only the matplotlib plotting backend" in (outcome.result.error or "")
    drawn = await ok(client, FRAME + "\nax = df.plot(x='x', y='y', title='xy')\nax.get_title()")
    assert drawn.result.result_preview == "'xy'" and len(drawn.result.figures) == 1


@IN_MODULE_LOOP
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


@IN_MODULE_LOOP
async def test_a_matrix_product_runs_under_the_worker_thread_limit(client: SandboxClient) -> None:
    code = "import numpy as np\na = np.ones((400, 400))\nfloat((a @ a).sum())"
    outcome = await ok(client, code, timeout_s=30.0)
    assert outcome.result.result_preview == "64000000.0"


@IN_MODULE_LOOP
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


@IN_MODULE_LOOP
async def test_the_same_figure_gives_the_same_bytes(client: SandboxClient) -> None:
    code = "import matplotlib.pyplot as plt\nplt.plot([3, 1, 2])\nplt.title('same')"
    first, second = (await ok(client, code)).result.figures, (await ok(client, code)).result.figures
    assert first[0].digest == second[0].digest


@IN_MODULE_LOOP
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
    runtime = Runtime(request=lambda f: f, output_limit=500, value_limit=1000)
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
    runtime = Runtime(request=lambda f: f, output_limit=500, value_limit=1000)
    runtime.namespace["hostile"] = _Hostile()
    reply = runtime.execute("x = 1\nhostile", 1, 0.0)
    kinds = {change["name"]: change["kind"] for change in reply["changes"]}
    assert kinds == {"x": "value", "hostile": "opaque"}


IDIOM_SETUP = """import numpy as np
import pandas as pd
import matplotlib.pyplot as plt
df = pd.DataFrame({'day': pd.date_range('2024-01-01', periods=10, freq='D'),
                   'units': np.arange(10), 'region': list('nsnsnsnsns'),
                   'price': np.linspace(1, 2, 10)})
"""

IDIOMS = [
    "df.set_index('day').resample('W').units.sum()",
    "df.set_index('day')['units'].resample('W').mean().tolist()",
    "df.units.rolling(3).mean().iloc[-1]",
    "df.units.ewm(span=3).mean().iloc[-1]",
    "df.units.expanding().sum().iloc[-1]",
    "df.region.str.upper().tolist()[:2]",
    "df.day.dt.day_name().iloc[0]",
    "df.day.dt.month.iloc[0]",
    "df.region.astype('category').cat.categories.tolist()",
    "df.region.value_counts().to_dict()",
    "df.pivot_table(index='region', values='units', aggfunc='sum').units.tolist()",
    "pd.melt(df, id_vars=['day'], value_vars=['units']).shape",
    "pd.concat([df, df]).shape",
    "pd.crosstab(df.region, df.units > 4).values.tolist()",
    "pd.cut(df.units, 3).value_counts().tolist()",
    "[row.units for row in df.itertuples()][:3]",
    "[r['units'] for _, r in df.iterrows()][:3]",
    "df.groupby('region').agg(total=('units', 'sum'), avg=('price', 'mean')).total.tolist()",
    "df.groupby('region').units.apply(lambda s: s.max() - s.min()).tolist()",
    "df.groupby('region')['units'].transform('sum').tolist()[:2]",
    "df.describe().loc['mean', 'units']",
    "df.loc[df.units > 5, 'price'].sum()",
    "df.query if False else df[(df.units > 2) & (df.region == 'n')].shape",
    "df.assign(rev=lambda d: d.units * d.price).rev.sum()",
    "df.sort_values('price', ascending=False).head(3).units.tolist()",
    "df.units.quantile([0.25, 0.75]).tolist()",
    "df.index.tolist()[:3]",
    "df.dtypes.astype(str).to_dict()",
    "np.corrcoef(df.units, df.price)[0, 1]",
    "np.percentile(df.units, 90)",
    "df.units.values.reshape(2, 5).sum(axis=1).tolist()",
    "df.to_dict('records')[0]['units']",
    "df.columns.tolist()",
    "df.shape",
    "df.units.dtype.name",
    "df.day.iloc[0].year",
    "(df.day.max() - df.day.min()).days",
    "pd.Timestamp('2024-03-01').strftime('%b %Y')",
    "df.merge(df[['region']].drop_duplicates().assign(mgr=['a','b']), on='region')"
    ".mgr.tolist()[:2]",
    "df.fillna(0).isna().sum().sum()",
    "df.units.clip(2, 5).tolist()[:3]",
    "df.nlargest(2, 'units').units.tolist()",
    "df.units.cumsum().iloc[-1]",
    "df.units.shift(1).fillna(0).tolist()[:2]",
    "df.units.pct_change().iloc[-1]",
    "df.groupby(['region', df.day.dt.isocalendar().week]).units.sum().unstack().shape",
    "fig, ax = plt.subplots()\nax.bar(df.region, df.units)\nax.set_title('t')\n"
    "ax.tick_params(axis='x', rotation=45)\nfig.tight_layout()\nlen(ax.patches)",
    "ax = df.plot(x='day', y='units')\n"
    "ax.xaxis.set_major_formatter(ax.xaxis.get_major_formatter())\nax.get_legend() is not None",
    "import matplotlib.dates as mdates\nfig, ax = plt.subplots()\nax.plot(df.day, df.units)\n"
    "ax.xaxis.set_major_formatter(mdates.DateFormatter('%m-%d'))\nax.get_xlabel()",
    "np.random.seed(0)\nnp.random.rand(2).shape",
    "rng = np.random.default_rng(1)\nrng.normal(size=3).shape",
    "a = np.array([[1,2],[3,4]])\nnp.linalg.inv(a).round(2).tolist()",
    "df.units.to_numpy().mean()",
    "df.units.mean().round(2)",
    "float(df.units.sum())",
    "df.groupby('region').size().to_dict()",
    "df.loc[0, 'units']",
    "df.iloc[0]['region']",
    "df.at[0, 'units']",
    "df.units.between(2, 4).sum()",
    "df.region.unique().tolist()",
    "df.region.nunique()",
    "df.units.idxmax()",
    "df.rename(columns={'units': 'u'}).u.sum()",
    "df.drop(columns=['price']).shape",
    "df.reset_index().columns.tolist()[:2]",
    "df.set_index('region').loc['n'].shape",
    "df.apply(lambda r: r.units * 2, axis=1).sum()",
    "df.units.map(lambda v: v % 3).tolist()[:3]",
    "df.round(1).price.tolist()[:2]",
    "s = df.units.copy()\ns[0] = 100\ns.iloc[0]",
    "df2 = df.copy()\ndf2.loc[df2.units > 5, 'units'] = 0\ndf2.units.sum()",
    "df.select_dtypes('number').columns.tolist()",
    "df.groupby('region').units.agg(['sum', 'mean']).shape",
]


def test_the_common_idioms_of_data_work_pass_the_guards() -> None:
    runtime = Runtime(request=lambda f: f, output_limit=3000, value_limit=1_000_000)
    failed = {}
    with warnings.catch_warnings():  # a worker's warnings go nowhere; here they would be errors
        warnings.simplefilter("ignore")
        assert runtime.execute(IDIOM_SETUP, 1, 0.0)["ok"]
        for code in IDIOMS:
            reply = runtime.execute(code, 2, 0.0)
            if not reply["ok"]:
                failed[code] = reply["error"]
    assert failed == {}
