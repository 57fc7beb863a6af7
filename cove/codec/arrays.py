"""Arrays and tables in the value codec: numpy arrays and scalars, pandas Series, DataFrames and
indexes, in a pickle-free binary form (see ``cove.codec``).

An array's data is its ``.npy`` file (``numpy.lib.format`` with ``allow_pickle=False``: a short
header naming dtype, order and shape, then the raw buffer), base64 in the JSON text. Arrays of
``object`` dtype are not binary: each element is encoded by the codec like any value (so only
values the codec supports; a DataFrame column of Python strings is such an array). A pandas value
is a small manifest (index, names, dtypes) plus one array per column, so a later, chunked storage
can keep each column on its own. numpy and pandas are imported only when such a value is met.

=====================================  ====================================================
Value                                  Encoded as
=====================================  ====================================================
ndarray (numeric, bool, datetime64,    ``{"ndarray": base64 .npy}``
timedelta64, complex, fixed-width
str/bytes)
ndarray of objects                     ``{"ndarray_objects": [shape, [items]]}``
numpy scalar (``np.float64(1.5)``)     ``{"npscalar": base64 .npy of the 0-d array}``
Series                                 ``{"series": [column, index, name]}``
DataFrame                              ``{"dataframe": [columns index, index, [column...]]}``
Index                                  ``{"index": [column, name]}`` (``[.., freq]`` for a
                                       DatetimeIndex with a frequency)
RangeIndex                             ``{"rangeindex": [start, stop, step, name]}``
MultiIndex                             ``{"multiindex": [[level indexes], [codes], names]}``
a column                               a numpy array, or ``{"categorical": [codes,
                                       categories, ordered]}``, ``{"datetimetz": [int64
                                       array, unit, tz]}``, ``{"masked": [dtype, data,
                                       mask]}``, ``{"strings": [storage, na, [items]]}``
=====================================  ====================================================

``fingerprint`` hashes the buffers themselves (blake2b), so the tracker can tell an unchanged
array or frame without encoding it; it returns None where buffers do not determine the value
(object arrays), and the encoding's fingerprint is used instead.
"""

from __future__ import annotations

import hashlib
import io
import sys
from collections.abc import Callable
from typing import Any

from cove.codec.nodes import Json, NodeReader, NodeWriter
from cove.errors import CodecError

_ROOTS = ("numpy", "pandas")
TAGS = (
    "ndarray", "ndarray_objects", "npscalar", "series", "dataframe", "index", "rangeindex",
    "multiindex", "categorical", "datetimetz", "masked", "strings",
)  # fmt: skip
"""The tags of this module (the decoder routes them here)."""


def handles(value: object) -> bool:
    """Whether ``value`` is of a numpy or pandas type (encoded here, or refused here)."""
    module = type.__dict__["__module__"].__get__(type(value))
    return type(module) is str and module.split(".")[0] in _ROOTS


def is_data(value: object) -> bool:
    """Whether ``value`` is an array, a Series, a DataFrame or an Index (a binary snapshot)."""
    if not handles(value) or "numpy" not in sys.modules:
        return False
    import numpy

    if isinstance(value, numpy.ndarray):
        return True
    pandas = sys.modules.get("pandas")
    return pandas is not None and isinstance(value, pandas.DataFrame | pandas.Series | pandas.Index)


# -- encoding ---------------------------------------------------------------------------------


def encode(enc: NodeWriter, value: Any, depth: int) -> Json:
    """The tree of a numpy or pandas value.

    Raises:
        CodecError: A type or dtype this module does not support.
    """
    import numpy

    if isinstance(value, numpy.ndarray):
        if type(value) is not numpy.ndarray:
            raise CodecError(f"cannot encode a {type(value).__qualname__} (an ndarray subclass)")
        return _array(enc, value, depth)
    if isinstance(value, numpy.generic):
        if value.dtype.hasobject:
            raise CodecError("cannot encode a numpy object scalar")
        return _npy(enc, "npscalar", numpy.asarray(value))
    pandas = sys.modules.get("pandas")
    if pandas is not None:
        if type(value) is pandas.DataFrame:
            return _frame(enc, value, depth)
        if type(value) is pandas.Series:
            return enc.tag(
                "series",
                [_column(enc, value.array, depth), _index(enc, value.index, depth),
                 enc.node(value.name, depth)],
            )  # fmt: skip
        if isinstance(value, pandas.Index):
            return _index(enc, value, depth)
    raise CodecError(f"cannot encode a value of type {type(value).__qualname__}")


def _npy(enc: NodeWriter, tag: str, array: Any) -> Json:
    """``{tag: base64}`` of the array's ``.npy`` file: the header ``numpy.lib.format`` writes
    (version 1.0), then the data in C order (Fortran order for a Fortran-contiguous array).

    The data is handed to the encoder as a view of the array's own memory, not a copy (the
    encoder charges its size before building anything: a huge array fails at once).
    """
    import numpy
    from numpy.lib import format as npy

    header = io.BytesIO()
    try:
        npy.write_array_header_1_0(header, npy.header_data_from_array_1_0(array))
    except ValueError as exc:
        raise CodecError(f"cannot encode an array of dtype {array.dtype}: {exc}") from exc
    if array.flags.f_contiguous and not array.flags.c_contiguous:
        array = array.T
    flat = numpy.ascontiguousarray(array).reshape(-1).view(numpy.uint8)
    return enc.binary(tag, header.getvalue(), memoryview(flat))  # type: ignore[arg-type]


def _array(enc: NodeWriter, array: Any, depth: int) -> Json:
    if not array.dtype.hasobject:
        if array.dtype.names is not None or array.dtype.kind == "V":
            raise CodecError(f"cannot encode an array of structured dtype {array.dtype}")
        return _npy(enc, "ndarray", array)
    if array.dtype.kind != "O":
        raise CodecError(f"cannot encode an array of dtype {array.dtype}")
    inner = enc.enter(array, depth)
    items = enc.items(array.ravel(order="C").tolist(), array.size, inner)
    enc.leave(array)
    return enc.tag("ndarray_objects", [list(array.shape), items])


def _column(enc: NodeWriter, values: Any, depth: int) -> Json:
    """A pandas array (one column, an index's values)."""
    import numpy
    import pandas

    if type(values) is pandas.arrays.NumpyExtensionArray:
        values = values.to_numpy()
    dtype = values.dtype
    if isinstance(dtype, numpy.dtype):
        return _array(enc, numpy.asarray(values), depth)
    if isinstance(dtype, pandas.CategoricalDtype):
        return enc.tag(
            "categorical",
            [_array(enc, values.codes, depth), _index(enc, dtype.categories, depth),
             bool(dtype.ordered)],
        )  # fmt: skip
    if isinstance(dtype, pandas.DatetimeTZDtype):
        return enc.tag("datetimetz", [_array(enc, values.asi8, depth), dtype.unit, str(dtype.tz)])
    if isinstance(dtype, pandas.StringDtype) and dtype.storage == "python":
        na = "NA" if dtype.na_value is pandas.NA else "nan"
        items = [None if not isinstance(item, str) else item for item in values.tolist()]
        return enc.tag("strings", [dtype.storage, na, enc.items(items, len(items), depth + 1)])
    if isinstance(values, pandas.api.extensions.ExtensionArray) and hasattr(values, "_mask"):
        data, mask = values._data, values._mask
        return enc.tag("masked", [str(dtype), _array(enc, data, depth), _array(enc, mask, depth)])
    raise CodecError(f"cannot encode a pandas column of dtype {dtype}")


def _index(enc: NodeWriter, index: Any, depth: int) -> Json:
    import pandas

    name = enc.node(index.name, depth) if not isinstance(index, pandas.MultiIndex) else None
    if type(index) is pandas.RangeIndex:
        return enc.tag("rangeindex", [index.start, index.stop, index.step, name])
    if type(index) is pandas.MultiIndex:
        levels = [_index(enc, level, depth) for level in index.levels]
        codes = [_array(enc, code, depth) for code in index.codes]
        names = [enc.node(n, depth) for n in index.names]
        return enc.tag("multiindex", [levels, codes, names])
    plain = (pandas.Index, pandas.DatetimeIndex, pandas.TimedeltaIndex, pandas.CategoricalIndex)
    if type(index) not in plain:
        raise CodecError(f"cannot encode a {type(index).__qualname__}")
    payload = [_column(enc, index.array, depth), name]
    freq = getattr(index, "freqstr", None) if type(index) is pandas.DatetimeIndex else None
    if freq is not None:
        payload.append(freq)
    return enc.tag("index", payload)


def _frame(enc: NodeWriter, frame: Any, depth: int) -> Json:
    inner = enc.enter(frame, depth)
    columns = [_column(enc, frame.iloc[:, position].array, inner)
               for position in range(frame.shape[1])]  # fmt: skip
    tree = enc.tag(
        "dataframe", [_index(enc, frame.columns, inner), _index(enc, frame.index, inner), columns]
    )
    enc.leave(frame)
    return tree


# -- decoding ---------------------------------------------------------------------------------


def decoders() -> dict[str, Callable[[NodeReader, Json, int], Any]]:
    """The decoder's handlers of this module's tags."""
    return {
        "ndarray": lambda dec, p, d: _read_npy(dec.binary(p)),
        "ndarray_objects": _objects,
        "npscalar": lambda dec, p, d: _read_npy(dec.binary(p))[()],
        "series": _series,
        "dataframe": _dataframe,
        "index": _plain_index,
        "rangeindex": _range_index,
        "multiindex": _multi_index,
        "categorical": _categorical,
        "datetimetz": _datetimetz,
        "masked": _masked,
        "strings": _strings,
    }


def _text(payload: Json) -> str:
    if type(payload) is not str:
        raise TypeError(f"expected a string, got {payload!r:.80}")
    return payload


def _items(payload: Json, length: int) -> list[Any]:
    if type(payload) is not list or len(payload) != length:
        raise TypeError(f"expected a list of {length} items, got {payload!r:.80}")
    return payload


def _read_npy(raw: bytes) -> Any:
    try:
        import numpy
        from numpy.lib import format as npy
    except ImportError as exc:
        raise CodecError("this value needs numpy: pip install 'cove[data]'") from exc
    array = npy.read_array(io.BytesIO(raw), allow_pickle=False)
    if type(array) is not numpy.ndarray:
        raise ValueError("not an array")
    return array if array.flags.writeable else array.copy()


def _array_node(dec: NodeReader, tree: Json, depth: int) -> Any:
    import numpy

    value = dec.node(tree, depth)
    if type(value) is not numpy.ndarray:
        raise TypeError(f"expected an array, got {type(value).__name__}")
    return value


def _objects(dec: NodeReader, payload: Json, depth: int) -> Any:
    import numpy

    shape, items = _items(payload, 2)
    if type(shape) is not list or not all(type(n) is int and n >= 0 for n in shape):
        raise ValueError(f"bad shape {shape!r:.80}")
    values = dec.items(items, depth)
    if len(values) != int(numpy.prod(shape, dtype=numpy.int64)):
        raise ValueError("the items do not fill the shape")
    array = numpy.empty(len(values), dtype=object)
    array[:] = values if values else []
    return array.reshape(shape)


def _pandas() -> Any:
    try:
        import pandas
    except ImportError as exc:
        raise CodecError("this value needs pandas: pip install 'cove[data]'") from exc
    return pandas


def _column_values(dec: NodeReader, tree: Json, depth: int) -> Any:
    pandas = _pandas()
    value = dec.node(tree, depth)
    import numpy

    if type(value) is numpy.ndarray or isinstance(value, pandas.api.extensions.ExtensionArray):
        return value
    raise TypeError(f"expected a column, got {type(value).__name__}")


def _series(dec: NodeReader, payload: Json, depth: int) -> Any:
    pandas = _pandas()
    values, index, name = _items(payload, 3)
    return pandas.Series(
        _column_values(dec, values, depth),
        index=_index_node(dec, index, depth),
        name=dec.node(name, depth),
        copy=False,
    )


def _dataframe(dec: NodeReader, payload: Json, depth: int) -> Any:
    pandas = _pandas()
    columns, index, data = _items(payload, 3)
    labels = _index_node(dec, columns, depth)
    rows = _index_node(dec, index, depth)
    if type(data) is not list or len(data) != len(labels):
        raise ValueError("the columns do not match their labels")
    arrays = [_column_values(dec, column, depth) for column in data]
    frame = pandas.DataFrame(dict(enumerate(arrays)), index=rows, copy=False)
    if len(arrays) == 0:
        frame = pandas.DataFrame(index=rows)
    frame.columns = labels
    return frame


def _index_node(dec: NodeReader, tree: Json, depth: int) -> Any:
    pandas = _pandas()
    value = dec.node(tree, depth)
    if not isinstance(value, pandas.Index):
        raise TypeError(f"expected an index, got {type(value).__name__}")
    return value


def _plain_index(dec: NodeReader, payload: Json, depth: int) -> Any:
    pandas = _pandas()
    if type(payload) is not list or len(payload) not in (2, 3):
        raise TypeError(f"expected [values, name(, freq)], got {payload!r:.80}")
    values = _column_values(dec, payload[0], depth)
    name = dec.node(payload[1], depth)
    if len(payload) == 3:
        return pandas.DatetimeIndex(values, name=name, freq=_text(payload[2]))
    return pandas.Index(values, name=name, copy=False)


def _range_index(dec: NodeReader, payload: Json, depth: int) -> Any:
    start, stop, step, name = _items(payload, 4)
    if not all(type(n) is int for n in (start, stop, step)):
        raise TypeError("range bounds must be integers")
    return _pandas().RangeIndex(start, stop, step, name=dec.node(name, depth))


def _multi_index(dec: NodeReader, payload: Json, depth: int) -> Any:
    levels, codes, names = _items(payload, 3)
    if type(levels) is not list or type(codes) is not list or type(names) is not list:
        raise TypeError("malformed multi-index")
    return _pandas().MultiIndex(
        levels=[_index_node(dec, level, depth) for level in levels],
        codes=[_array_node(dec, code, depth) for code in codes],
        names=[dec.node(name, depth) for name in names],
        verify_integrity=True,
    )


def _categorical(dec: NodeReader, payload: Json, depth: int) -> Any:
    codes, categories, ordered = _items(payload, 3)
    dtype = _pandas().CategoricalDtype(_index_node(dec, categories, depth), ordered=bool(ordered))
    return _pandas().Categorical.from_codes(_array_node(dec, codes, depth), dtype=dtype)


def _datetimetz(dec: NodeReader, payload: Json, depth: int) -> Any:
    pandas = _pandas()
    values, unit, tz = _items(payload, 3)
    dtype = pandas.DatetimeTZDtype(unit=_text(unit), tz=_text(tz))
    stamps = _array_node(dec, values, depth)
    if stamps.dtype != "int64" or stamps.ndim != 1:
        raise TypeError("time stamps are a 1-d int64 array")
    naive = pandas.array(stamps.view(f"M8[{dtype.unit}]"))
    return naive.tz_localize("UTC").tz_convert(dtype.tz)


def _masked(dec: NodeReader, payload: Json, depth: int) -> Any:
    pandas = _pandas()
    name, data, mask = _items(payload, 3)
    dtype = pandas.api.types.pandas_dtype(_text(name))
    if not isinstance(dtype, pandas.api.extensions.ExtensionDtype):
        raise ValueError(f"not a masked dtype: {name!r:.40}")
    kind = dtype.construct_array_type()
    return kind(_array_node(dec, data, depth), _array_node(dec, mask, depth))


def _strings(dec: NodeReader, payload: Json, depth: int) -> Any:
    pandas = _pandas()
    storage, na, items = _items(payload, 3)
    if storage != "python" or na not in ("NA", "nan"):
        raise ValueError("unknown string storage")
    import numpy

    dtype = pandas.StringDtype("python", na_value=pandas.NA if na == "NA" else numpy.nan)
    values = dec.items(items, depth)
    if not all(item is None or type(item) is str for item in values):
        raise TypeError("string columns hold strings")
    return pandas.array(values, dtype=dtype)


# -- fingerprints and previews -------------------------------------------------------------------


def fingerprint(value: object) -> str | None:
    """A hash of an array's or a pandas value's buffers, or None when buffers do not decide it.

    The same shape, dtypes, labels and bytes give the same fingerprint; any change of them a
    different one (blake2b, 16 hex digits, marked so it never equals an encoding's fingerprint).
    """
    if not is_data(value):
        return None
    digest = hashlib.blake2b(digest_size=8)
    try:
        if not _feed(digest, value):
            return None
    except (TypeError, ValueError, AttributeError):
        return None
    return "b" + digest.hexdigest()[1:]


def _feed(digest: Any, value: Any) -> bool:
    import numpy

    if isinstance(value, numpy.ndarray):
        return _feed_array(digest, value)
    pandas = sys.modules["pandas"]
    if isinstance(value, pandas.DataFrame):
        digest.update(f"frame{value.shape}".encode())
        columns = (value.iloc[:, i].array for i in range(value.shape[1]))
        return (
            _feed_index(digest, value.columns)
            and _feed_index(digest, value.index)
            and all(_feed_values(digest, column) for column in columns)
        )
    if isinstance(value, pandas.Series):
        digest.update(b"series" + repr(value.name).encode())
        return _feed_index(digest, value.index) and _feed_values(digest, value.array)
    return _feed_index(digest, value)


def _feed_array(digest: Any, array: Any) -> bool:
    import numpy

    if array.dtype.hasobject:
        return False
    digest.update(f"{array.dtype.str}{array.shape}".encode())
    digest.update(numpy.ascontiguousarray(array).view(numpy.uint8).reshape(-1))
    return True


def _feed_values(digest: Any, values: Any) -> bool:
    import numpy

    pandas = sys.modules["pandas"]
    if type(values) is pandas.arrays.NumpyExtensionArray:
        values = values.to_numpy()
    dtype = values.dtype
    digest.update(str(dtype).encode() + repr(getattr(dtype, "na_value", None)).encode())
    if isinstance(dtype, numpy.dtype):
        return _feed_array(digest, numpy.asarray(values))
    if isinstance(dtype, pandas.CategoricalDtype):
        return _feed_array(digest, values.codes) and _feed_index(digest, dtype.categories)
    if isinstance(dtype, pandas.DatetimeTZDtype):
        return _feed_array(digest, values.asi8)
    if isinstance(dtype, pandas.StringDtype):
        missing = numpy.asarray(values.isna())
        filled = numpy.asarray(values.fillna(""), dtype=object)
        return _feed_array(digest, missing) and _feed_array(
            digest, pandas.util.hash_array(filled, categorize=False)
        )
    if hasattr(values, "_mask"):
        return _feed_array(digest, values._data) and _feed_array(digest, values._mask)
    return False


def _feed_index(digest: Any, index: Any) -> bool:
    pandas = sys.modules["pandas"]
    digest.update(f"{type(index).__name__}{list(index.names)!r}".encode())
    if type(index) is pandas.RangeIndex:
        digest.update(f"{index.start},{index.stop},{index.step}".encode())
        return True
    if isinstance(index, pandas.MultiIndex):
        return all(_feed_index(digest, level) for level in index.levels) and all(
            _feed_array(digest, codes) for codes in index.codes
        )
    digest.update(repr(getattr(index, "freqstr", None)).encode())
    return _feed_values(digest, index.array)


def preview(value: Any, limit: int) -> str | None:
    """A one-line summary of an array or a pandas value (shape, dtypes, first values); None for
    other values. Never raises."""
    if not handles(value):
        return None
    try:
        return _summary(value, limit)
    except Exception:
        return None


def _summary(value: Any, limit: int) -> str | None:
    import numpy

    pandas = sys.modules.get("pandas")
    if isinstance(value, numpy.generic):
        return str(value)
    if isinstance(value, numpy.ndarray):
        flat = numpy.array2string(value.ravel()[:8], separator=", ", threshold=8)
        return f"array shape={value.shape} dtype={value.dtype}: {' '.join(flat.split())}"[:limit]
    if pandas is not None and isinstance(value, pandas.DataFrame):
        rows, cols = value.shape
        dtypes = ", ".join(f"{c} {t}" for c, t in list(value.dtypes.items())[:12])
        first = value.head(2).to_dict(orient="records") if rows else []
        return f"DataFrame {rows:,} rows × {cols} columns: {dtypes}; head: {first}"[:limit]
    if pandas is not None and isinstance(value, pandas.Series):
        head = value.head(4).tolist()
        return f"Series {value.name!r} {len(value):,} × {value.dtype}: {head}"[:limit]
    if pandas is not None and isinstance(value, pandas.Index):
        return f"{type(value).__name__} {len(value):,} × {value.dtype}: {value[:4].tolist()}"[
            :limit
        ]
    return None


def display(value: Any, limit: int) -> str | None:
    """The text a block's trailing array or pandas value shows (pandas' own table), cut to
    ``limit``; None for other values. Never raises."""
    if not handles(value):
        return None
    try:
        text = str(value)
    except Exception:
        return None
    return text if len(text) <= limit else text[: limit - 1] + "…"
