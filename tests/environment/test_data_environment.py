"""The data libraries through a real environment: workspace files read and written by name
through the host (under the quota), and DataFrames and arrays that are real variables —
versioned, restored after a restart and after a reopen."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pandas as pd
import pytest

from tests.environment.test_environment import Harness

pytestmark = pytest.mark.slow  # sandbox workers started per test

CSV = "day,region,units\n2024-01-01,north,3\n2024-01-02,south,5\n2024-01-03,north,4\n"


@pytest.fixture
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    async with Harness.running(tmp_path, workspace_quota_mb=1) as h:
        yield h


async def test_files_are_read_and_written_by_name_through_the_host(harness: Harness) -> None:
    harness.workspace.mkdir(parents=True, exist_ok=True)
    (harness.workspace / "sales.csv").write_text(CSV)
    frame = pd.DataFrame({"a": [1, 2]})
    frame.to_excel(harness.workspace / "q3.xlsx", index=False)
    env = await harness.open()
    try:
        [(read, _)] = await harness.turn(
            env,
            "import pandas as pd\nimport matplotlib.pyplot as plt\n"
            "sales = pd.read_csv('sales.csv', parse_dates=['day'])\nq3 = pd.read_excel('q3.xlsx')\n"
            "sales.groupby('region').units.sum().to_csv('totals.csv')\n"
            "q3.to_excel('out/q3-copy.xlsx', index=False)\n"
            "fig, ax = plt.subplots()\nax.plot(sales.units)\nfig.savefig('chart.png')\n"
            "(len(sales), int(q3.a.sum()))",
        )
        assert read.result.ok, read.result.error
        assert read.result.result_preview == "(3, 3)"
        assert (harness.workspace / "totals.csv").read_text() == (
            "region,units\nnorth,7\nsouth,5\n"
        )
        copy = pd.read_excel(harness.workspace / "out" / "q3-copy.xlsx")
        assert copy.equals(frame)
        assert (harness.workspace / "chart.png").read_bytes().startswith(b"\x89PNG")
        [(refused, _)] = await harness.turn(
            env,
            "import numpy as np\nbig = pd.DataFrame({'x': np.arange(200_000)})\n"
            "big.to_csv('big.csv')",
        )
        assert not refused.result.ok
        assert "quota" in (refused.result.error or "")
        [(outside, _)] = await harness.turn(env, "pd.read_csv('../cove.db')")
        assert "'..' is not allowed" in (outside.result.error or "")
        [(url, _)] = await harness.turn(env, "pd.read_csv('https://example.com/x.csv')")
        assert "URL" in (url.result.error or "")
    finally:
        await env.aclose()


async def test_arrays_and_frames_are_variables_that_survive_a_restart_and_a_reopen(
    harness: Harness,
) -> None:
    env = await harness.open()
    try:
        [(made, writes)] = await harness.turn(
            env,
            "import numpy as np\nimport pandas as pd\n"
            "df = pd.DataFrame({'day': pd.date_range('2024-01-01', periods=4, freq='D'),\n"
            "                   'units': [3, 5, 4, 1], 'region': ['n', 's', 'n', 's']})\n"
            "df['region'] = df['region'].astype('category')\n"
            "grid = np.arange(12.0).reshape(3, 4)\nnames = np.array(['a', 'bc'])",
        )
        assert made.result.ok, made.result.error
        kinds = {w.name: (w.kind, w.type_name) for w in writes}
        assert kinds["df"] == ("value", "DataFrame")
        assert kinds["grid"] == ("value", "ndarray") and kinds["names"] == ("value", "ndarray")
        preview = next(w.preview for w in writes if w.name == "df")
        assert preview.startswith("DataFrame 4 rows × 3 columns: day datetime64")
        [(_, unchanged)] = await harness.turn(env, "float(grid.sum()), len(df)")
        assert unchanged == ()  # read, not changed: no new version
        [(timed_out, _)] = await harness.turn(env, "while True:\n    pass", timeout_s=1)
        assert timed_out.restart is not None
        assert {"df", "grid", "names"} <= set(timed_out.restart.restored)
        [(after, _)] = await harness.turn(
            env, "(str(df.region.dtype), df.units.sum(), grid[2, 3], names.tolist())"
        )
        assert (
            after.result.result_preview
            == "('category', np.int64(13), np.float64(11.0), ['a', 'bc'])"
        )
    finally:
        await env.aclose()
    reopened = await harness.open()
    try:
        [(again, _)] = await harness.turn(reopened, "df.day.dt.day.tolist()")
        assert again.result.result_preview == "[1, 2, 3, 4]"
    finally:
        await reopened.aclose()


async def test_versions_of_a_frame_diff_row_by_row(harness: Harness) -> None:
    env = await harness.open()
    try:
        await harness.turn(env, "import pandas as pd\ndf = pd.DataFrame({'units': [3, 5, 4]})")
        await harness.turn(env, "df.loc[1, 'units'] = 50")
        [(diff, _)] = await harness.turn(env, "print(var_diff('df', 1, 2))")
        assert "-1,5" in diff.result.stdout and "+1,50" in diff.result.stdout
    finally:
        await env.aclose()
