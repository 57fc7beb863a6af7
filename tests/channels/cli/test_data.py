"""Data work end to end through ``cove``: a CSV attached, pandas answering (merge, datetime,
groupby, pivot, rolling), a chart made; the number in the answer, the figure's file named; replay
reproducing the numbers and the figure bytes; a later process still holding the DataFrame.

The real engine, sandbox (with numpy, pandas and matplotlib loaded) and store, driven by the real
``openai`` client against the fake endpoint.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tests.channels.cli.helpers import Cove
from tests.channels.data_story import ANALYSIS, CHART, MANAGERS, SALES, expected
from tests.fakes.openai_server import FakeOpenAI
from tests.scripted import reply

pytestmark = pytest.mark.slow  # cove processes, each with its sandbox workers


@pytest.fixture(autouse=True)
def with_libraries(cli: Cove) -> None:
    """These tests need numpy, pandas and matplotlib in the sandbox (their default)."""
    cli.env.pop("COVE_SANDBOX_LIBRARIES")


def test_a_csv_answered_with_pandas_and_a_chart_then_replayed_and_reopened(
    tmp_path: Path, cli: Cove, server: FakeOpenAI
) -> None:
    (tmp_path / "sales.csv").write_text(SALES)
    (tmp_path / "managers.csv").write_text(MANAGERS)
    server.add_replies(
        reply([ANALYSIS, CHART], "{{best}} sold most: {{best_revenue}}"),
    )
    result = cli(
        "run", "--json", "--attach", str(tmp_path / "sales.csv"),
        "--attach", str(tmp_path / "managers.csv"), "Who sold most? Chart units per month.",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    manager, revenue = expected()
    assert data["answer"] == f"{manager} sold most: {revenue}"
    [figure] = data["figures"]
    png = Path(figure["path"]).read_bytes()
    assert png.startswith(b"\x89PNG") and hashlib.sha256(png).hexdigest() == figure["digest"]
    assert (figure["width"], figure["height"]) == (500, 300)
    assert figure["title"] == "Units per month"
    assert "x 'month'" in figure["description"] and "y 'units'" in figure["description"]
    # The model was told about the figure it made, in the context of its next call.
    conversation = data["conversation_id"]

    # The figure is stored with its block, the DataFrame as a real variable (not opaque).
    shown = cli.json("show", conversation)
    block = shown["turns"][0]["iterations"][0]["blocks"][1]
    assert [f["digest"] for f in block["figures"]] == [figure["digest"]]
    kinds = {v["name"]: (v["kind"], v["type_name"]) for v in shown["var_versions"]}
    assert kinds["merged"] == ("value", "DataFrame")
    assert kinds["by_manager"] == ("value", "Series")

    text = cli("show", conversation)
    assert f"figure: {figure['path']} (500×300 px; title 'Units per month'" in text.stdout
    export = cli("export", conversation)
    assert "figure 1: 500×300 px; title 'Units per month'" in export.stdout
    assert figure["digest"][:16] in export.stdout

    # Replay runs the recorded code again: the same numbers and the same figure bytes.
    replayed = cli("replay", conversation)
    assert replayed.exit_code == 0, replayed.stdout + replayed.stderr

    # A new process (a new worker) still holds the DataFrame.
    server.add_replies(
        reply(["rows = len(merged)\nnorth = int(merged[merged.region == 'north'].units.sum())"],
              "{{rows}} rows, north sold {{north}}"),
    )  # fmt: skip
    again = cli("run", "-c", conversation, "How many rows, and north's units?")
    assert again.exit_code == 0, again.stderr
    assert again.stdout.strip() == "9 rows, north sold 16"
    said = "\n".join(m["content"] for m in server.requests[-1]["messages"])
    assert "figure 1: 500×300 px; title 'Units per month'" in said


def test_run_names_the_figure_files_on_stderr(
    tmp_path: Path, cli: Cove, server: FakeOpenAI
) -> None:
    server.add_replies(
        reply(["import matplotlib.pyplot as plt\nplt.plot([1, 4, 9])\nplt.title('squares')"],
              "drawn"),
    )  # fmt: skip
    result = cli("run", "Draw the squares.")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "drawn"
    [line] = [line for line in result.stderr.splitlines() if line.startswith("figure: ")]
    path = Path(line.removeprefix("figure: ").split(" (")[0])
    assert path.read_bytes().startswith(b"\x89PNG")
    assert path.parent.parent == tmp_path / "cove.figures"  # beside the database, not a workspace
    assert "title 'squares'" in line


def test_with_model_images_the_newest_figure_goes_to_the_next_call(
    cli: Cove, server: FakeOpenAI
) -> None:
    chart = "import matplotlib.pyplot as plt\nplt.plot([1, 4, 9])\nplt.title('squares')"
    server.add_replies(reply([chart]), reply([], "seen"), reply([chart]), reply([], "seen"))
    assert cli("run", "Draw the squares.").exit_code == 0
    plain = server.requests[1]["messages"][2]["content"]
    assert isinstance(plain, str)  # off by default: text only
    cli.env["COVE_MODEL_IMAGES"] = "1"
    assert cli("run", "Draw the squares again.").exit_code == 0
    text, image = server.requests[3]["messages"][2]["content"]
    assert "[attached image: [t1.i1.1] figure 1: 640×480 px; title 'squares']" in text["text"]
    assert image["image_url"]["url"].startswith("data:image/png;base64,iVBOR")
    assert image["image_url"]["detail"] == "low"
