"""Figures of the analyses (PNG, matplotlib Agg): line plots against a swept variable, histograms, attention
heat maps, and the verdicts' gains over seeds and dev loss curves.

matplotlib is optional (``pip install 'ordo[plots]'``) and imported only when a plot is drawn.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from ordo.data.textio import atomic_write
from ordo.errors import import_extra


def pyplot() -> ModuleType:
    """``matplotlib.pyplot`` on the Agg backend (files only, no display).

    Raises:
        MissingExtraError: naming ``ordo[plots]`` when matplotlib is not installed.
    """
    import_extra("matplotlib", "plots").use("Agg")
    return importlib.import_module("matplotlib.pyplot")


def save(figure: Any, path: str | Path) -> Path:
    """Write ``figure`` to ``path`` as a PNG atomically, and close it."""
    with atomic_write(path, "wb") as handle:
        figure.savefig(handle, format="png", dpi=120)
    pyplot().close(figure)
    return Path(path)


LEGEND_INSIDE = 5  # lines whose legend still fits inside the axes of a line plot


def line_plot(
    x_labels: Sequence[str], series: Mapping[str, Sequence[float]], xlabel: str, ylabel: str, path: str | Path,
    title: str = "",
) -> Path:
    """Write a PNG with one marked line per entry of ``series`` over the categorical ``x_labels``; beyond
    :data:`LEGEND_INSIDE` lines the legend goes to the right of the axes, where it hides none of them."""
    plt = pyplot()
    outside = len(series) > LEGEND_INSIDE
    figure, axes = plt.subplots(figsize=(10.0 if outside else 6.4, 4.0))
    if len(series) > len(plt.cm.tab10.colors):  # no two lines of one colour
        axes.set_prop_cycle(color=plt.cm.tab20.colors)
    positions = list(range(len(x_labels)))
    for name, values in series.items():
        axes.plot(positions, list(values), marker="o", label=name)
    axes.set_xticks(positions, list(x_labels))
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    if title:
        axes.set_title(title)
    axes.grid(alpha=0.3)
    if outside:
        axes.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize="small")
    else:
        axes.legend()
    figure.tight_layout()
    return save(figure, path)


def histogram(values: Sequence[float], bins: int, xlabel: str, path: str | Path, title: str = "") -> Path:
    """Write a PNG histogram of ``values`` in ``bins`` equal bins (the y axis counts sentences)."""
    plt = pyplot()
    figure, axes = plt.subplots(figsize=(6.4, 4.0))
    axes.hist(list(values), bins=bins, color="#4c72b0", edgecolor="white")
    axes.set_xlabel(xlabel)
    axes.set_ylabel("sentences")
    if title:
        axes.set_title(title)
    axes.grid(alpha=0.3)
    figure.tight_layout()
    return save(figure, path)


CJK_FONTS = ("Noto Sans CJK JP", "Noto Sans CJK SC", "Source Han Sans", "IPAexGothic", "IPAGothic",
             "WenQuanYi Zen Hei", "Microsoft YaHei", "MS Gothic")  # fallbacks for Chinese/Japanese labels


def gain_plot(rows: Sequence[tuple[str, float, tuple[float, float], float | None]], xlabel: str, path: str | Path,
              title: str = "") -> Path:
    """Write a PNG with one row per comparison (label, mean gain, its interval, a target gain or None), top
    first: the interval as a bar, the mean as a dot, the target as a cross, and a line at 0."""
    plt = pyplot()
    figure, axes = plt.subplots(figsize=(9.0, 0.5 * len(rows) + 1.4))
    for y, (_, mean, (low, high), target) in enumerate(reversed(rows)):
        axes.plot([low, high], [y, y], color="#4c72b0", linewidth=2.5)
        axes.plot([mean], [y], "o", color="#c44e52")
        if target is not None:
            axes.plot([target], [y], "x", color="black", markersize=8)
    axes.axvline(0.0, color="black", linewidth=0.8)
    axes.set_yticks(range(len(rows)), [label for label, _, _, _ in reversed(rows)])
    axes.set_xlabel(xlabel)
    if title:
        axes.set_title(title)
    axes.grid(axis="x", alpha=0.3)
    figure.tight_layout()
    return save(figure, path)


def curve_panels(panels: Sequence[tuple[str, Mapping[str, Mapping[int, float]]]], xlabel: str, ylabel: str,
                 path: str | Path, columns: int = 3, x_from: float = float("-inf")) -> Path:
    """Write a PNG of small line plots, one per panel (its title, then series name -> {x: y}), from ``x_from``
    on, on shared axes so that panels compare."""
    plt = pyplot()
    rows = -(-len(panels) // columns)
    figure, grid = plt.subplots(rows, columns, figsize=(4.0 * columns, 2.8 * rows), sharex=True, sharey=True,
                                squeeze=False)
    for axes, (title, series) in zip(grid.flat, panels):
        for name, curve in series.items():
            points = sorted((x, y) for x, y in curve.items() if x >= x_from)
            axes.plot([x for x, _ in points], [y for _, y in points], label=name)
        axes.set_title(title, fontsize=9)
        axes.grid(alpha=0.3)
        axes.legend(fontsize=7)
    for axes in list(grid.flat)[len(panels):]:
        axes.set_visible(False)
    for axes in grid[-1]:
        axes.set_xlabel(xlabel)
    for axes in grid[:, 0]:
        axes.set_ylabel(ylabel)
    figure.tight_layout()
    return save(figure, path)


def label_fonts() -> list[str]:
    """DejaVu Sans, then the installed CJK fonts of :data:`CJK_FONTS` as per-glyph fallbacks (Chinese and
    Japanese tokens come out as boxes on a machine that has none of them)."""
    import_extra("matplotlib", "plots")
    font_manager = importlib.import_module("matplotlib.font_manager")
    installed = {font.name for font in font_manager.fontManager.ttflist}
    return ["DejaVu Sans", *(name for name in CJK_FONTS if name in installed)]


def heatmap(
    matrix: Sequence[Sequence[float]], row_labels: Sequence[str], column_labels: Sequence[str], path: str | Path,
    title: str = "",
) -> Path:
    """Write a PNG of ``matrix`` (rows: target tokens, columns: source tokens) in grey levels, as the
    attention figures of paper 003 (Figures 1 and 4) show them."""
    plt = pyplot()
    with plt.rc_context({"font.family": label_fonts()}):
        width = max(4.0, 0.35 * len(column_labels) + 1.5)
        height = max(3.0, 0.35 * len(row_labels) + 1.5)
        figure, axes = plt.subplots(figsize=(width, height))
        axes.imshow(matrix, cmap="Greys", vmin=0.0, vmax=1.0, aspect="auto")
        axes.set_xticks(range(len(column_labels)), list(column_labels), rotation=90)
        axes.set_yticks(range(len(row_labels)), list(row_labels))
        axes.xaxis.tick_top()
        if title:
            axes.set_title(title, pad=40)
        figure.tight_layout()
        return save(figure, path)
