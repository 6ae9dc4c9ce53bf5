"""Line plots of one figure against a swept variable, one line per system (PNG, matplotlib Agg).

matplotlib is optional (``pip install 'ordo[plots]'``) and imported only when a plot is drawn.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType

from ordo.data.textio import atomic_write
from ordo.errors import import_extra


def pyplot() -> ModuleType:
    """``matplotlib.pyplot`` on the Agg backend (files only, no display).

    Raises:
        MissingExtraError: naming ``ordo[plots]`` when matplotlib is not installed.
    """
    import_extra("matplotlib", "plots").use("Agg")
    return importlib.import_module("matplotlib.pyplot")


def line_plot(
    x_labels: Sequence[str], series: Mapping[str, Sequence[float]], xlabel: str, ylabel: str, path: str | Path,
    title: str = "",
) -> Path:
    """Write a PNG with one marked line per entry of ``series`` over the categorical ``x_labels``."""
    plt = pyplot()
    figure, axes = plt.subplots(figsize=(6.4, 4.0))
    positions = list(range(len(x_labels)))
    for name, values in series.items():
        axes.plot(positions, list(values), marker="o", label=name)
    axes.set_xticks(positions, list(x_labels))
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    if title:
        axes.set_title(title)
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    with atomic_write(path, "wb") as handle:
        figure.savefig(handle, format="png", dpi=120)
    plt.close(figure)
    return Path(path)


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
    with atomic_write(path, "wb") as handle:
        figure.savefig(handle, format="png", dpi=120)
    plt.close(figure)
    return Path(path)


CJK_FONTS = ("Noto Sans CJK JP", "Noto Sans CJK SC", "Source Han Sans", "IPAexGothic", "IPAGothic",
             "WenQuanYi Zen Hei", "Microsoft YaHei", "MS Gothic")  # fallbacks for Chinese/Japanese labels


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
        with atomic_write(path, "wb") as handle:
            figure.savefig(handle, format="png", dpi=120)
    plt.close(figure)
    return Path(path)
