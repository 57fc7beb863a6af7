"""A DataFrame's text read back into cells: labels with spaces, datetimes, index names, cut
tables; anything else (a Series, an array, plain text) is left as text."""

from __future__ import annotations

import numpy as np
import pandas as pd

from cove.channels.web.tables import frame_table

SALES = pd.DataFrame(
    {
        "region": ["north", "south", "east"],
        "units": [3, 5, 2],
        "price": [2.5, 2.0, 4.0],
        "day": pd.to_datetime(["2024-01-03", "2024-01-09", "2024-02-01"]),
    }
)


def test_a_frame_with_text_numbers_and_dates() -> None:
    table = frame_table(str(SALES))
    assert table is not None
    assert table.columns == ["", "region", "units", "price", "day"]
    assert table.rows[2] == ["2", "east", "2", "4.0", "2024-02-01"]
    assert table.index_names is None and table.caption == ""


def test_labels_and_values_with_spaces_stay_one_cell() -> None:
    table = frame_table(str(pd.DataFrame({"a b": ["x y", "z"], "c": [1, 2]})))
    assert table is not None
    assert table.columns == ["", "a b", "c"]
    assert table.rows == [["0", "x y", "1"], ["1", "z", "2"]]


def test_index_names_and_the_columns_name() -> None:
    pivot = SALES.pivot_table(index="units", columns="region", values="price")
    table = frame_table(str(pivot))
    assert table is not None
    assert table.columns == ["region", "east", "north", "south"]
    assert table.index_names is not None and table.index_names[0] == "units"
    assert table.rows[0] == ["2", "4.0", "NaN", "NaN"]
    by_day = frame_table(str(SALES.set_index("day")))
    assert by_day is not None and by_day.rows[0][0] == "2024-01-03"


def test_a_cut_table_keeps_its_marks_and_its_size() -> None:
    big = pd.DataFrame(np.arange(400).reshape(100, 4), columns=list("abcd"))
    table = frame_table(str(big))
    assert table is not None
    assert table.caption == "[100 rows x 4 columns]"
    assert ["..", "...", "...", "...", "..."] in table.rows
    assert table.rows[-1] == ["99", "396", "397", "398", "399"]


def test_what_is_not_a_frame_stays_text() -> None:
    for text in (
        str(SALES["units"]),  # a Series ends with its dtype
        str(np.arange(12).reshape(3, 4)),
        "[1, 2, 3]",
        "one line",
        None,
        "",
        "word\nanother",
    ):
        assert frame_table(text) is None, text
