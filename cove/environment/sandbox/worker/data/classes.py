"""The surfaces of the library classes sandbox code gets objects of (see ``surface.py``).

The six classes people work with — ``DataFrame``, ``Series``, ``Index``, ``ndarray``, ``Figure``,
``Axes`` — list every attribute they hand out. The others a block meets through them (group-by
and window objects, accessors, scalars, dtypes, artists...) are rule surfaces: their public
attributes are kept but the library-wide removals and their own removed and wrapped ones.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cove.environment.sandbox.worker.data import methods
from cove.environment.sandbox.worker.data.files import WorkspaceFiles
from cove.environment.sandbox.worker.data.libraries import LIBRARY_ROOTS, Libraries
from cove.environment.sandbox.worker.data.surface import (
    NOT_LIBRARY,
    Surface,
    Surfaces,
    Wrapped,
    keep,
    remove,
)

FRAME_KEPT = keep(
    "computes on the frame's own data and returns new objects or views; mutators change only "
    "this frame; callables given are called with its data (no names looked up, no paths)",
    """
T abs add add_prefix add_suffix align all any asfreq asof assign astype at at_time attrs axes
between_time bfill boxplot clip columns combine combine_first compare convert_dtypes copy corr
corrwith count cov cummax cummin cumprod cumsum describe diff div divide dot drop
drop_duplicates droplevel dropna dtypes duplicated empty eq equals ewm expanding explode ffill
fillna filter first_valid_index flags floordiv from_arrow from_dict from_records ge get groupby
gt head hist iat idxmax idxmin iloc index infer_objects insert interpolate isetitem isin isna
isnull items iterrows itertuples join keys kurt kurtosis last_valid_index le loc lt map mask max
mean median melt memory_usage merge min mod mode mul multiply ndim ne nlargest notna notnull
nsmallest nunique pct_change pipe pivot pivot_table plot pop pow prod product quantile radd rank
rdiv reindex reindex_like rename rename_axis reorder_levels replace resample reset_index
rfloordiv rmod rmul rolling round rpow rsub rtruediv select select_dtypes sem set_axis set_flags
set_index shape shift size skew sort_index sort_values sparse squeeze stack std sub subtract sum
swaplevel tail take to_dict to_numpy to_period to_records to_timestamp transpose truediv
truncate tz_convert tz_localize unstack update value_counts values var where xs
""",
)

SERIES_KEPT = keep(
    "computes on the series' own data and returns new objects or views; mutators change only "
    "this series; callables given are called with its data (no names looked up, no paths)",
    """
T abs add add_prefix add_suffix align all any argmax argmin argsort array asfreq asof astype at
at_time attrs autocorr axes between between_time bfill case_when cat clip combine combine_first
compare convert_dtypes copy corr count cov cummax cummin cumprod cumsum describe diff div divide
divmod dot drop drop_duplicates droplevel dropna dt dtype dtypes duplicated empty eq equals ewm
expanding explode factorize ffill fillna filter first_valid_index flags floordiv from_arrow ge
get groupby gt hasnans head hist iat idxmax idxmin iloc index infer_objects interpolate
is_monotonic_decreasing is_monotonic_increasing is_unique isin isna isnull item items keys kurt
kurtosis last_valid_index le list loc lt map mask max mean median memory_usage min mod mode mul
multiply name nbytes ndim ne nlargest notna notnull nsmallest nunique pct_change pipe plot pop
pow prod product quantile radd rank rdiv rdivmod reindex reindex_like rename rename_axis
reorder_levels repeat replace resample reset_index rfloordiv rmod rmul rolling round rpow rsub
rtruediv searchsorted sem set_axis set_flags shape shift size skew sort_index sort_values sparse
squeeze std str struct sub subtract sum swaplevel tail take to_dict to_frame to_list to_numpy
to_period to_timestamp tolist transpose truediv truncate tz_convert tz_localize unique unstack
update value_counts values var where xs
""",
)

INDEX_KEPT = keep(
    "set operations, lookups and conversions on the index's own labels; indexes are immutable",
    """
T all any append argmax argmin argsort array asof asof_locs astype copy delete diff difference
drop drop_duplicates droplevel dropna dtype duplicated empty equals factorize fillna get_indexer
get_indexer_for get_indexer_non_unique get_level_values get_loc get_slice_bound groupby
has_duplicates hasnans identical infer_objects inferred_type insert intersection is_
is_monotonic_decreasing is_monotonic_increasing is_unique isin isna isnull item join map max
memory_usage min name names nbytes ndim nlevels notna notnull nunique putmask ravel reindex
rename repeat replace round searchsorted set_names shape shift size slice_indexer slice_locs
sort_values sortlevel str symmetric_difference take to_flat_index to_frame to_list to_numpy
to_series tolist transpose union unique value_counts values view where
""",
)

ARRAY_KEPT = keep(
    "array methods and properties: computations, copies and bounds-checked views of its own buffer",
    """
T all any argmax argmin argpartition argsort astype base byteswap choose clip compress conj
conjugate copy cumprod cumsum device diagonal dot dtype fill flags flat flatten imag item
itemsize mT max mean min nbytes ndim nonzero partition prod put ravel real repeat reshape resize
round searchsorted shape size sort squeeze std strides sum swapaxes take to_device tobytes
tolist trace transpose var view
""",
)
ARRAY_REMOVED = {
    "setflags": "changes memory protection flags (a read-only view made writable)",
    "getfield": "reinterprets raw bytes at an offset",
    "setfield": "writes raw bytes at an offset",
    "data": "the raw buffer object (tobytes() copies it)",
}

FIGURE_KEPT = keep(
    "builds, lays out and queries the figure's own artists; rendering happens in memory",
    """
add_artist add_axes add_axobserver add_callback add_gridspec add_subfigure add_subplot
align_labels align_titles align_xlabels align_ylabels autofmt_xdate axes clear clf colorbar
contains convert_xunits convert_yunits delaxes dpi draw draw_artist draw_without_rendering
figimage figure findobj format_cursor_data frameon gca get_agg_filter get_alpha get_animated
get_axes get_children get_clip_box get_clip_on get_clip_path get_constrained_layout
get_constrained_layout_pads get_cursor_data get_default_bbox_extra_artists get_dpi get_edgecolor
get_facecolor get_figheight get_figure get_figwidth get_frameon get_gid get_in_layout get_label
get_layout_engine get_linewidth get_mouseover get_path_effects get_picker get_rasterized
get_size_inches get_sketch_params get_snap get_suptitle get_supxlabel get_supylabel
get_tight_layout get_tightbbox get_transform get_transformed_clip_path_and_affine get_url
get_visible get_window_extent get_zorder have_units is_transform_set legend mouseover number
pchanged pick pickable properties remove remove_callback sca set set_agg_filter set_alpha
set_animated set_clip_box set_clip_on set_clip_path set_constrained_layout
set_constrained_layout_pads set_dpi set_edgecolor set_facecolor set_figheight set_figure
set_figwidth set_frameon set_gid set_in_layout set_label set_layout_engine set_linewidth
set_mouseover set_path_effects set_picker set_rasterized set_size_inches set_sketch_params
set_snap set_tight_layout set_transform set_url set_visible set_zorder stale sticky_edges
subfigures subplot_mosaic subplots subplots_adjust suptitle supxlabel supylabel text
tight_layout update update_from zorder
    patch bbox transFigure dpi_scale_trans subplotpars texts images lines patches legends artists
    subfigs suppressComposite
    """,
)

AXES_KEPT = keep(
    "draws on and queries these axes: plots, labels, limits, ticks, legends; callables given "
    "(formatters, filters) are called with values",
    """
ArtistList acorr add_artist add_callback add_child_axes add_collection add_container add_image
add_line add_patch add_table angle_spectrum annotate apply_aspect arrow artists autoscale
autoscale_view axes axhline axhspan axis axline axvline axvspan bar bar_label barbs barh boxplot
broken_barh bxp can_pan can_zoom cla clabel clear cohere collections contains contains_point
contour contourf convert_xunits convert_yunits csd drag_pan draw draw_artist ecdf end_pan
errorbar eventplot figure fill fill_between fill_betweenx findobj format_coord
format_cursor_data format_xdata format_ydata get_adjustable get_agg_filter get_alpha get_anchor
get_animated get_aspect get_autoscale_on get_autoscalex_on get_autoscaley_on get_axes_locator
get_axisbelow get_box_aspect get_children get_clip_box get_clip_on get_clip_path get_cursor_data
get_data_ratio get_default_bbox_extra_artists get_facecolor get_fc get_figure
get_forward_navigation_events get_frame_on get_gid get_gridspec get_images get_in_layout
get_label get_legend get_legend_handles_labels get_lines get_mouseover get_navigate
get_navigate_mode get_path_effects get_picker get_position get_rasterization_zorder
get_rasterized get_shared_x_axes get_shared_y_axes get_sketch_params get_snap get_subplotspec
get_tightbbox get_title get_transform get_transformed_clip_path_and_affine get_url get_visible
get_window_extent get_xaxis get_xaxis_text1_transform get_xaxis_text2_transform
get_xaxis_transform get_xbound get_xgridlines get_xinverted get_xlabel get_xlim
get_xmajorticklabels get_xmargin get_xminorticklabels get_xscale get_xticklabels get_xticklines
get_xticks get_yaxis get_yaxis_text1_transform get_yaxis_text2_transform get_yaxis_transform
get_ybound get_ygridlines get_yinverted get_ylabel get_ylim get_ymajorticklabels get_ymargin
get_yminorticklabels get_yscale get_yticklabels get_yticklines get_yticks get_zorder grid
grouped_bar has_data have_units hexbin hist hist2d hlines images imshow in_axes indicate_inset
indicate_inset_zoom inset_axes invert_xaxis invert_yaxis is_transform_set label_outer legend
lines locator_params loglog magnitude_spectrum margins matshow minorticks_off minorticks_on
mouseover name patches pchanged pcolor pcolorfast pcolormesh phase_spectrum pick pickable pie
pie_label plot properties psd quiver quiverkey redraw_in_frame relim remove remove_callback
reset_position scatter secondary_xaxis secondary_yaxis semilogx semilogy set set_adjustable
set_agg_filter set_alpha set_anchor set_animated set_aspect set_autoscale_on set_autoscalex_on
set_autoscaley_on set_axes_locator set_axis_off set_axis_on set_axisbelow set_box_aspect
set_clip_box set_clip_on set_clip_path set_facecolor set_fc set_figure
set_forward_navigation_events set_frame_on set_gid set_in_layout set_label set_mouseover
set_navigate set_navigate_mode set_path_effects set_picker set_position set_prop_cycle
set_rasterization_zorder set_rasterized set_sketch_params set_snap set_subplotspec set_title
set_transform set_url set_visible set_xbound set_xinverted set_xlabel set_xlim set_xmargin
set_xscale set_xticklabels set_xticks set_ybound set_yinverted set_ylabel set_ylim set_ymargin
set_yscale set_yticklabels set_yticks set_zorder sharex sharey specgram spy stackplot stairs
stale start_pan stem step sticky_edges streamplot table tables text texts tick_params
ticklabel_format tricontour tricontourf tripcolor triplot twinx twiny update update_datalim
update_from use_sticky_edges viewLim violin violinplot vlines xaxis_date xaxis_inverted xcorr
yaxis_date yaxis_inverted zorder
    xaxis yaxis spines patch transAxes transData transScale transLimits bbox dataLim title
    containers child_axes legend_ fmt_xdata fmt_ydata ignore_existing_data_limits
    """,
)

RULE = "public attributes of {}: computations, conversions and drawing on the object's own data"


def _by_name(*names: str) -> dict[str, Wrapped]:
    why = "takes function names: only the reductions and transforms of methods.FUNCTION_NAMES"
    return {name: Wrapped(why, methods.by_function_name(name)) for name in names}


def _writers(files: WorkspaceFiles, *names: str) -> dict[str, Wrapped]:
    why = "a file name is a workspace file, written through the host (no path, no open file)"
    return {name: Wrapped(why, methods.writer(name, files)) for name in names}


def _data_methods(
    files: WorkspaceFiles, output: Callable[[str], None], generator: Callable[[], Any]
) -> dict[str, Wrapped]:
    return {
        **_by_name("agg", "aggregate", "apply", "transform"),
        **_writers(files, "to_csv", "to_excel", "to_json", "to_string"),
        "info": Wrapped("prints into the block's output", methods.info(output)),
        "sample": Wrapped(
            "without random_state, draws from the block's seeded generator",
            methods.sample(generator),
        ),
    }


def _frame_column(pandas: Any) -> Callable[[Any, str], Any]:
    """``df.price`` for a column, ``row.price`` for a label of a Series (as pandas reads them)."""
    frame, series = pandas.DataFrame, pandas.Series

    def column(obj: Any, name: str) -> Any:
        if isinstance(obj, frame) and name in obj.columns:
            return obj[name]
        labelled = isinstance(obj, series) and not isinstance(obj.index, pandas.RangeIndex)
        if labelled and name in obj.index:
            return obj[name]
        return NOT_LIBRARY

    return column


def build_surfaces(
    libraries: Libraries,
    files: WorkspaceFiles,
    *,
    output: Callable[[str], None],
    generator: Callable[[], Any],
    now: Callable[[], float],
) -> Surfaces:
    """Every surface, for one worker's guards.

    Args:
        libraries: The loaded libraries.
        files: The workspace bridge for writers.
        output: Appends text to the running block's output (``info``).
        generator: The running block's numpy generator (``sample``).
        now: The running block's clock (``Timestamp.now``).
    """
    np, pd = libraries.numpy, libraries.pandas
    import matplotlib.axes
    import matplotlib.figure

    data = _data_methods(files, output, generator)
    surfaces: list[tuple[type, Surface]] = [
        (
            pd.DataFrame,
            Surface("pandas.DataFrame", FRAME_KEPT, {**data, **_writers(files, "to_html")}),
        ),
        (pd.Series, Surface("pandas.Series", SERIES_KEPT, data)),
        (pd.Index, Surface("pandas.Index", INDEX_KEPT)),
        (np.ndarray, Surface("numpy.ndarray", ARRAY_KEPT, removed=ARRAY_REMOVED)),
        (
            matplotlib.figure.Figure,
            Surface(
                "matplotlib.figure.Figure",
                FIGURE_KEPT,
                {
                    "savefig": Wrapped(
                        "renders in memory and writes a workspace file through the host",
                        methods.figure_method("savefig", files),
                    ),
                    "show": Wrapped(
                        "figures are shown when the block ends",
                        methods.figure_method("show", files),
                    ),
                },
            ),
        ),
        (matplotlib.axes.Axes, Surface("matplotlib.axes.Axes", AXES_KEPT)),
    ]
    surfaces += _rule_surfaces(libraries, now)
    return Surfaces(
        surfaces, LIBRARY_ROOTS, columns=_frame_column(pd), writable=writable_pairs(libraries)
    )


def writable_pairs(libraries: Libraries) -> list[tuple[type, frozenset[str]]]:
    """The attributes of library objects sandbox code may set: labels, nothing else."""
    pd = libraries.pandas
    return [
        (pd.DataFrame, frozenset({"columns", "index"})),
        (pd.Series, frozenset({"name", "index"})),
        (pd.Index, frozenset({"name", "names"})),
    ]


def rule_classes(libraries: Libraries) -> list[tuple[type, str]]:
    """``(class, what its objects are)`` of every rule surface."""
    np, pd = libraries.numpy, libraries.pandas
    import matplotlib.artist
    import matplotlib.colorbar
    import matplotlib.colors
    import matplotlib.container
    import matplotlib.font_manager
    import matplotlib.gridspec
    import matplotlib.markers
    import matplotlib.path
    import matplotlib.ticker
    import matplotlib.transforms
    from pandas.core import indexing
    from pandas.core.groupby.groupby import BaseGroupBy
    from pandas.core.indexes.accessors import Properties
    from pandas.core.window.rolling import BaseWindow
    from pandas.plotting import PlotAccessor

    found = [
        (BaseGroupBy, "pandas.api.typing.DataFrameGroupBy, SeriesGroupBy, Resampler (BaseGroupBy)"),
        (BaseWindow, "pandas.api.typing.Rolling, Expanding, ExponentialMovingWindow (BaseWindow)"),
        (pd.core.strings.accessor.StringMethods, "pandas.Series.str (StringMethods)"),
        (Properties, "pandas.Series.dt (datetime-like Properties)"),
        (pd.core.arrays.categorical.CategoricalAccessor, "pandas.Series.cat (CategoricalAccessor)"),
        (pd.core.arrays.sparse.accessor.SparseAccessor, "pandas.Series.sparse (SparseAccessor)"),
        (PlotAccessor, "pandas.DataFrame.plot (PlotAccessor)"),
        (indexing._LocationIndexer, "pandas.DataFrame.loc/iloc (location indexers)"),
        (indexing._ScalarAccessIndexer, "pandas.DataFrame.at/iat (scalar indexers)"),
        (pd.DatetimeIndex, "pandas.DatetimeIndex"),
        (pd.TimedeltaIndex, "pandas.TimedeltaIndex"),
        (pd.PeriodIndex, "pandas.PeriodIndex"),
        (pd.MultiIndex, "pandas.MultiIndex"),
        (pd.CategoricalIndex, "pandas.CategoricalIndex"),
        (pd.IntervalIndex, "pandas.IntervalIndex"),
        (pd.RangeIndex, "pandas.RangeIndex"),
        (pd.Timestamp, "pandas.Timestamp"),
        (pd.Timedelta, "pandas.Timedelta"),
        (pd.Period, "pandas.Period"),
        (pd.Interval, "pandas.Interval"),
        (type(pd.NaT), "pandas.NaT"),
        (type(pd.NA), "pandas.NA"),
        (pd.DateOffset.__mro__[1], "pandas.DateOffset (offsets)"),
        (
            pd.api.extensions.ExtensionArray,
            "pandas.api.extensions.ExtensionArray (Categorical, arrays)",
        ),
        (pd.api.extensions.ExtensionDtype, "pandas.api.extensions.ExtensionDtype (dtypes)"),
        (pd.Flags, "pandas.Flags"),
        (pd.Grouper, "pandas.Grouper"),
        (pd.NamedAgg, "pandas.NamedAgg"),
        (pd.core.indexes.frozen.FrozenList, "pandas.Index.names (FrozenList)"),
        (type(pd.IndexSlice), "pandas.IndexSlice"),
        (np.generic, "numpy.generic (scalars)"),
        (np.dtype, "numpy.dtype"),
        (np.ufunc, "numpy.ufunc"),
        (np.flatiter, "numpy.flatiter"),
        (type(np.empty(0).flags), "numpy.ndarray.flags"),
        (np.random.Generator, "numpy.random.Generator"),
        (np.finfo, "numpy.finfo"),
        (np.iinfo, "numpy.iinfo"),
        (np.errstate, "numpy.errstate"),
        (np.vectorize, "numpy.vectorize"),
        (np.poly1d, "numpy.poly1d"),
        (np.broadcast, "numpy.broadcast"),
        (np.nditer, "numpy.nditer"),
        (np.ndenumerate, "numpy.ndenumerate"),
        (np.ndindex, "numpy.ndindex"),
        (np.busdaycalendar, "numpy.busdaycalendar"),
        (type(np.s_).__mro__[0], "numpy.mgrid/ogrid/s_/index_exp (index helpers)"),
        (type(np.mgrid), "numpy.mgrid, numpy.ogrid (grids)"),
        (
            matplotlib.artist.Artist,
            "matplotlib.artist.Artist (lines, text, patches, legends, axis, ticks...)",
        ),
        (
            matplotlib.container.Container,
            "matplotlib.container.Container (bar and errorbar containers)",
        ),
        (matplotlib.colors.Colormap, "matplotlib.colors.Colormap"),
        (matplotlib.colors.Normalize, "matplotlib.colors.Normalize"),
        (
            matplotlib.transforms.TransformNode,
            "matplotlib.transforms.TransformNode (transforms, boxes)",
        ),
        (matplotlib.gridspec.GridSpecBase, "matplotlib.gridspec.GridSpecBase"),
        (matplotlib.gridspec.SubplotSpec, "matplotlib.gridspec.SubplotSpec"),
        (matplotlib.ticker.TickHelper, "matplotlib.ticker.TickHelper (locators, formatters)"),
        (matplotlib.colorbar.Colorbar, "matplotlib.colorbar.Colorbar"),
        (matplotlib.markers.MarkerStyle, "matplotlib.markers.MarkerStyle"),
        (matplotlib.path.Path, "matplotlib.path.Path"),
        (matplotlib.font_manager.FontProperties, "matplotlib.font_manager.FontProperties"),
    ]
    return found


def _rule_surfaces(libraries: Libraries, now: Callable[[], float]) -> list[tuple[type, Surface]]:
    by_name = _by_name("agg", "aggregate", "apply", "transform")
    clock = {
        name: Wrapped("the block's recorded clock", methods.clock_method(name, now), on_class=True)
        for name in ("now", "today", "utcnow")
    }
    np, pd = libraries.numpy, libraries.pandas
    import matplotlib.font_manager
    from pandas.core.groupby.groupby import BaseGroupBy
    from pandas.core.window.rolling import BaseWindow

    own: dict[type, tuple[dict[str, Wrapped], dict[str, str]]] = {
        BaseGroupBy: (by_name, {}),
        BaseWindow: (by_name, {}),
        pd.Timestamp: (clock, {}),
        np.generic: ({}, ARRAY_REMOVED),
        matplotlib.font_manager.FontProperties: (
            {},
            remove("reads a font file by path", ("set_file", "get_file")),
        ),
    }
    surfaces = []
    for cls, what in rule_classes(libraries):
        wrapped, removed = own.get(cls, ({}, {}))
        path = f"{cls.__module__}.{cls.__qualname__}"
        surface = Surface(path, wrapped=dict(wrapped), removed=removed, rule=RULE.format(what))
        surfaces.append((cls, surface))
    return surfaces
