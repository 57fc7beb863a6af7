"""A DataFrame's text, as a block's value shows it, read back into table cells for the page.

A block whose value is a pandas DataFrame previews as pandas' own text table (columns aligned
with spaces, ``...`` where rows or columns were left out, ``[N rows x M columns]`` under a cut
table). ``frame_table`` finds its columns from the character positions that are blank on every
line and the cells pandas never leaves blank, and returns the cells; it returns None when the
text does not read as such a table (a Series, an array, anything else), which the page then
shows as text. Cells are text: the template escapes them like any other.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_CHARS = 20_000
MAX_COLUMNS = 40
MAX_ROWS = 200
FOOTER = re.compile(r"\[\d[\d,]* rows x \d[\d,]* columns\]")
SERIES_FOOTER = ("dtype:", "Name:", "Freq:", "Length:", "Categories")


@dataclass(frozen=True)
class FrameTable:
    """A DataFrame's text as cells.

    Attributes:
        columns: The column labels (the first is the columns' name, or empty).
        index_names: The row of index names under the labels when the frame shows one.
        rows: Each row's cells, its index label first.
        caption: pandas' ``[N rows x M columns]`` line of a cut table, or empty.
    """

    columns: list[str]
    index_names: list[str] | None
    rows: list[list[str]]
    caption: str = ""


def frame_table(text: str | None) -> FrameTable | None:
    """The cells of a DataFrame's text, or None when ``text`` is not one."""
    if not text or "\n" not in text or len(text) > MAX_CHARS:
        return None
    lines = text.rstrip("\n").split("\n")
    caption = ""
    if FOOTER.fullmatch(lines[-1].strip()):
        caption = lines.pop().strip()
        while lines and not lines[-1].strip():
            lines.pop()
    if not 2 <= len(lines) <= MAX_ROWS + 2 or _not_a_frame(lines):
        return None
    cells = _split(lines)
    if cells is None:
        return None
    header, *body = cells
    index_names = None
    if body and body[0][0] and not body[0][-1]:
        index_names = body.pop(0)
    if not body:
        return None
    return FrameTable(header, index_names, body, caption)


def _not_a_frame(lines: list[str]) -> bool:
    """Texts that cannot be a DataFrame's: an array's, a Series' (it ends with its dtype)."""
    first, last = lines[0].lstrip(), lines[-1]
    return first.startswith(("[", "array(", "<")) or last.startswith(SERIES_FOOTER)


def _split(lines: list[str]) -> list[list[str]] | None:
    """Each line cut into cells (see ``_spans``); None for fewer than two columns."""
    width = max(len(line) for line in lines)
    padded = [line.ljust(width) for line in lines]
    spans = _spans(padded, width)
    if not 2 <= len(spans) <= MAX_COLUMNS + 1:
        return None
    return [[line[a:b].strip() for a, b in spans] for line in padded]


def _spans(lines: list[str], width: int) -> list[tuple[int, int]]:
    """The columns' character ranges.

    Every run of positions blank on every line may part two columns. pandas prints something
    in every cell of a row (``NaN`` for a missing value) and aligns values to the right, so a
    column with a blank cell in some row is not one: it is the left part of a label or value
    with a space in it (``x y``), joined to the next column (the last one to the previous).
    """
    blank = [all(line[i] == " " for line in lines) for i in range(width)]
    spans: list[tuple[int, int]] = []
    at = 0
    while at < width:
        end = at
        while end < width and blank[end] == blank[at]:
            end += 1
        if not blank[at]:
            spans.append((at, end))
        at = end
    body = lines[2:] if _index_names(lines, spans) else lines[1:]
    index = 0
    while index < len(spans) and len(spans) > 1:
        a, b = spans[index]
        if all(line[a:b].strip() for line in body):
            index += 1
            continue
        other = index + 1 if index + 1 < len(spans) else index - 1
        low, high = sorted((index, other))
        spans[low : high + 1] = [(spans[low][0], spans[high][1])]
        index = low
    return spans


def _index_names(lines: list[str], spans: list[tuple[int, int]]) -> bool:
    """Whether the second line names the index: text at its start, none in the last column."""
    if len(lines) < 2 or len(spans) < 2:
        return False
    (a, b), (c, d) = spans[0], spans[-1]
    return bool(lines[1][a:b].strip()) and not lines[1][c:d].strip()
