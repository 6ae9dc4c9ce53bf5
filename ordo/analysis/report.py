"""``ordo analyze``'s reports: each runs one analysis and writes its table, plot and outputs to a folder."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path

from ordo.analysis.contrastive import (
    KINDS,
    PROBE_HEADERS,
    SEED_HEADERS,
    SOURCE_ORDER,
    ProbeResult,
    margin_lines,
    probe,
    probe_rows,
    seed_rows,
    source_order_variants,
    word_order_variants,
)
from ordo.analysis.groups import group_by_length, quantile_bounds, score_groups, source_lengths
from ordo.analysis.plots import histogram, line_plot
from ordo.analysis.systems import bleu_metric, compare_systems, robustness_curve, system_headers
from ordo.analysis.tables import Cell, markdown_table, write_tables
from ordo.api import load_run
from ordo.data.alignment.links import Link
from ordo.data.textio import atomic_write
from ordo.evaluation.bleu import corpus_scores
from ordo.evaluation.order import (
    alignment_tau,
    corpus_ribes,
    difficulty_buckets,
    fuzzy_reordering,
    ribes_tokens,
)
from ordo.evaluation.seeds import MAX_SEEDS, SeedMetric, compare_seeds
from ordo.evaluation.significance import bleu_bootstrap_p


def systems_report(
    runs: Sequence[tuple[str, Path]], sources: list[str], refs: list[str], out: Path, checkpoint: str = "best",
    tokenized_bleu: bool = False, device: str = "auto", **decode: object,
) -> str:
    """``out/systems.{md,tsv}`` (see :func:`compare_systems`) and each system's output ``out/NAME.hyp``."""
    results = compare_systems(runs, sources, refs, checkpoint, tokenized_bleu, device, **decode)
    for result in results:
        with atomic_write(out / f"{result.name}.hyp") as handle:
            handle.writelines(h + "\n" for h in result.hyps)
    return write_tables(out / "systems", system_headers(results[0].name), [r.row() for r in results])


def robustness_report(
    runs: Sequence[tuple[str, Path]], sources: list[str], refs: list[str], out: Path, fractions: Sequence[float],
    seed: int = 1, checkpoint: str = "best", tokenized_bleu: bool = False, device: str = "auto", **decode: object,
) -> str:
    """``out/robustness.{md,tsv,png}``: BLEU of every run against the share of swapped source words."""
    metric = bleu_metric(tokenized_bleu)
    curves = {
        name: robustness_curve(load_run(run_dir, checkpoint, device), sources, refs, fractions, seed, metric, **decode)
        for name, run_dir in runs
    }
    labels = [f"{round(100 * f)}%" for f in fractions]
    line_plot(labels, curves, "swapped source words", "BLEU", out / "robustness.png", "Swapped-word robustness")
    rows: list[list[Cell]] = [[name, *curve] for name, curve in curves.items()]
    return write_tables(out / "robustness", ["system", *labels], rows)


def contrastive_report(
    runs: Sequence[tuple[str, Path]], sources: list[str], refs: list[str], out: Path, seed: int = 1,
    checkpoint: str = "best", device: str = "auto", files: tuple[str, str] = ("source", "reference"),
    links: Sequence[Sequence[Link]] | None = None,
) -> str:
    """``out/contrastive.{md,tsv}``: how often each run scores every reference above the same words swapped, moved
    or reversed, and with ``links`` (the test pairs' word alignment) in the source's word order
    (:mod:`ordo.analysis.contrastive`), and each kind's variants in ``out/contrastive_KIND.txt`` (a line per test
    pair, empty where the kind leaves the pair out), every pair's margin under every run in
    ``out/contrastive_margins.tsv`` (:func:`ordo.analysis.contrastive.margin_lines`). Runs given under one name are seeds of one system, shown as
    ``NAME:1``, ``NAME:2``, ...; then ``out/contrastive_seeds.{md,tsv}`` compares the systems over their seeds
    (:func:`ordo.analysis.contrastive.seed_rows`)."""
    variants = {kind: word_order_variants(refs, kind, seed) for kind in KINDS}
    if links is not None:
        variants[SOURCE_ORDER] = source_order_variants(refs, links)
    for kind, texts in variants.items():
        with atomic_write(out / f"contrastive_{kind}.txt") as handle:
            handle.writelines((text or "") + "\n" for text in texts)
    names = [name for name, _ in runs]
    systems: dict[str, list[ProbeResult]] = {}
    for number, (name, run_dir) in enumerate(runs):
        label = name if names.count(name) == 1 else f"{name}:{names[:number + 1].count(name)}"
        found = probe(load_run(run_dir, checkpoint, device), label, sources, refs, variants, files)
        systems.setdefault(name, []).extend(found)
    results = [result for system_results in systems.values() for result in system_results]
    with atomic_write(out / "contrastive_margins.tsv") as handle:
        handle.writelines(margin_lines(results))
    text = write_tables(out / "contrastive", PROBE_HEADERS, probe_rows(results))
    if len(systems) < len(runs):
        text += "\n" + write_tables(out / "contrastive_seeds", SEED_HEADERS, seed_rows(systems))
    return text


def length_report(
    systems: Sequence[tuple[str, list[str]]], sources: list[str], refs: list[str], out: Path,
    tokenized_bleu: bool = False, groups: int = 6, bounds: Sequence[int] | None = None, unit: str = "words",
) -> str:
    """``out/length.{md,tsv,png}``: BLEU of every system's output per source-length group (paper 004 §5.4),
    the source counted in ``unit`` (:func:`ordo.analysis.groups.source_lengths`)."""
    lengths = source_lengths(sources, unit)
    groups_found = group_by_length(lengths, bounds if bounds is not None else quantile_bounds(lengths, groups))
    metric = bleu_metric(tokenized_bleu)
    scores = {name: score_groups(groups_found, hyps, refs, metric) for name, hyps in systems}
    labels = [g.label for g in groups_found]
    line_plot(labels, scores, f"source length ({unit})", "BLEU", out / "length.png", "BLEU by source length")
    rows: list[list[Cell]] = [["sentences", *[len(g.indices) for g in groups_found]]]
    rows += [[name, *values] for name, values in scores.items()]
    return write_tables(out / "length", ["system", *labels], rows)


def seeds_report(base_runs: Sequence[tuple[str, list[str]]], system_runs: Sequence[tuple[str, list[str]]],
                 refs: list[str], out: Path, metric: SeedMetric, target_gain: float | None = None,
                 environments: str = "not checked") -> str:
    """``out/seeds.{md,tsv}``: the score in ``metric`` of every (name, hypotheses) run of the baseline and the
    system; ``out/verdict.{md,tsv}``: the means, the gain with its 95% interval and the t-test's p over seeds,
    the pooled seed sd, the minimum gain these seeds detect with 80% power, the seeds per side that would detect
    ``target_gain``, the pooled paired bootstrap p over test sentences, the verdict
    (:mod:`ordo.evaluation.seeds`) and ``environments``, what the runs' records say (:mod:`ordo.provenance`).
    Returns both tables' markdown."""
    result = compare_seeds([hyps for _, hyps in base_runs], [hyps for _, hyps in system_runs], refs, metric,
                           target_gain)
    test, name = result.test, metric.name
    rows: list[list[Cell]] = [[side, run_name, score] for side, runs, scores in (
        ("baseline", base_runs, test.base_scores), ("system", system_runs, test.system_scores))
        for (run_name, _), score in zip(runs, scores)]
    seeds = write_tables(out / "seeds", ["side", "run", name], rows)
    low, high = test.interval
    needed = result.seeds_needed
    headers = ["baseline seeds", "system seeds", f"baseline mean {name}", f"system mean {name}", "gain",
               "95% interval", "p (t-test over seeds)", "seed sd (pooled)", "min. detectable gain (80% power)",
               "target gain", "seeds per side for it", "bootstrap p (pooled seeds)", "verdict", "runs' environments"]
    summary = write_tables(out / "verdict", headers, [[
        len(test.base_scores), len(test.system_scores), statistics.fmean(test.base_scores),
        statistics.fmean(test.system_scores), f"{test.mean_gain:+.2f}", f"[{low:+.2f}, {high:+.2f}]",
        f"{test.p_value:.3g}", test.sd, test.min_detectable_gain(), target_gain,
        None if target_gain is None else (needed or f"> {MAX_SEEDS}"), f"{result.sentence_p:.3g}",
        result.verdict, environments]])
    return f"{seeds}\n{summary}"


def sim_report(runs: Sequence[tuple[str, Path]], data_dir: Path, split: str = "test", checkpoint: str = "best",
               device: str = "auto") -> str:
    """A markdown table of Sim(PR^N, RE) and Sim(PE, RE) (paper 000, Eq. 12) for every run, with the share of
    pieces whose last-layer predicted position falls before the first position (ExGRE switched off there)."""
    from ordo.analysis.sim import reordering_similarity

    rows: list[list[Cell]] = []
    for name, run_dir in runs:
        result = reordering_similarity(run_dir, data_dir, split, checkpoint, device)
        rows.append([name, f"{result.learned:.4f}", f"{result.sequential:.4f}", result.pieces,
                     f"{result.before_first:.3f}"])
    return markdown_table(["system", "Sim(PR^N, RE)", "Sim(PE, RE)", "pieces", "b^N < 0.5 (no reordering)"], rows)


def attention_plots(runs: Sequence[tuple[str, Path]], sources: list[str], refs: list[str], line: int, out: Path,
                    checkpoint: str = "best", device: str = "auto",
                    files: tuple[str, str] = ("source", "reference")) -> list[Path]:
    """``out/attention_NAME.png``: the forced-decoding attention of test line ``line`` (1-based) for every run;
    ``files`` name the source and reference files in errors.

    Raises:
        InputError: for a ``line`` outside the test set, or one longer than a run's positions.
        ConfigError: for a run trained on lattices (its attention is over lattice edges, not the source's pieces).
    """
    from ordo.analysis.attention_align import attention_matrices, refuse_lattice_run
    from ordo.analysis.plots import heatmap
    from ordo.errors import InputError

    if not 1 <= line <= len(sources):
        raise InputError(f"--line {line}: the test set has lines 1..{len(sources)}")
    source, reference = sources[line - 1], refs[line - 1]
    paths = []
    for name, run_dir in runs:
        run = load_run(run_dir, checkpoint, device)
        refuse_lattice_run(run, f"--run {name}={run_dir}")
        matrix = next(attention_matrices(run, [source], [reference], files=files, first_line=line))
        columns = [*run.src_vocab.pieces(run.src_vocab.encode(source)), "</s>"]
        rows = [*run.tgt_vocab.pieces(run.tgt_vocab.encode(reference)), "</s>"]
        paths.append(heatmap(matrix.tolist(), rows, columns, out / f"attention_{name}.png", f"{name}, line {line}"))
    return paths


def sweep_report(scores: dict[str, float], out: Path, reference: str | None = None) -> str | None:
    """For systems named ``BASE@VALUE`` (e.g. ``future_cost_2@0.3``): ``out/sweep.{md,tsv}`` and one plot
    ``out/sweep_BASE.png`` per BASE of BLEU against the value, with ``reference``'s BLEU as a flat line;
    None when nothing was swept."""
    curves: dict[str, dict[float, float]] = {}
    for name, bleu in scores.items():
        base, sep, value = name.partition("@")
        if sep:
            curves.setdefault(base, {})[float(value)] = bleu
    if not curves:
        return None
    rows: list[list[Cell]] = []
    for base, curve in curves.items():
        values = sorted(curve)
        series = {base: [curve[v] for v in values]}
        if reference is not None and reference in scores:
            series[reference] = [scores[reference]] * len(values)
        labels = [f"{v:g}" for v in values]
        line_plot(labels, series, f"{base}: swept value", "BLEU", out / f"sweep_{base}.png", f"{base} sweep")
        rows += [[base, f"{v:g}", curve[v]] for v in values]
    return write_tables(out / "sweep", ["system", "value", "BLEU"], rows)


def length_ratio(hyp_tokens: Sequence[str], ref_tokens: Sequence[str]) -> float | None:
    """Output tokens over reference tokens (whitespace tokens of each line); None when the references hold none."""
    ref_count = sum(len(line.split()) for line in ref_tokens)
    return sum(len(line.split()) for line in hyp_tokens) / ref_count if ref_count else None


def order_report(
    systems: Sequence[tuple[str, list[str]]], refs: list[str], taus: Sequence[float], out: Path,
    tokenized: bool = False, edges: Sequence[float] | None = None,
) -> str:
    """``out/order.{md,tsv,png}``: every system's BLEU, chrF, RIBES (x100) and length ratio (output tokens over
    reference tokens, so that a bucket's loss can be told from a length effect) per bucket of reordering
    difficulty (:func:`ordo.evaluation.order.difficulty_buckets` of the test pairs' alignment τ, hardest
    first), with each system's BLEU difference to the first and its two-sided paired bootstrap p within the
    bucket (sacreBLEU's); ``out/difficulty.png``, the histogram of τ over the test set."""
    histogram(taus, 20, "Kendall τ of the alignment (1: monotone, -1: reversed)", out / "difficulty.png",
              "Reordering difficulty of the test set")
    buckets = difficulty_buckets(taus, edges)
    bleu = bleu_metric(tokenized)
    ribes_refs = ribes_tokens(refs, tokenized)
    first = systems[0][1]
    rows: list[list[Cell]] = []
    curves: dict[str, list[float]] = {}
    for name, hyps in systems:
        ribes_hyps = ribes_tokens(hyps, tokenized)
        for bucket in buckets:
            pick = bucket.indices
            hyp, ref, base = [hyps[i] for i in pick], [refs[i] for i in pick], [first[i] for i in pick]
            score = bleu(hyp, ref)
            curves.setdefault(name, []).append(score)
            same = name == systems[0][0]
            hyp_tokens, ref_tokens = [ribes_hyps[i] for i in pick], [ribes_refs[i] for i in pick]
            rows.append([name, bucket.label, len(pick), score, float(corpus_scores(hyp, ref)["chrf"]),
                         100 * corpus_ribes(hyp_tokens, ref_tokens), length_ratio(hyp_tokens, ref_tokens),
                         None if same else score - bleu(base, ref),
                         None if same else f"{bleu_bootstrap_p(base, hyp, ref):.3g}"])
    line_plot([b.label for b in buckets], curves, "reordering difficulty (alignment τ; left: hardest)", "BLEU",
              out / "order.png", "BLEU by reordering difficulty")
    headers = ["system", "bucket", "sentences", "BLEU", "chrF", "RIBES", "length ratio", "BLEU vs first",
               "bootstrap p"]
    return write_tables(out / "order", headers, rows)


def order_tau_report(alignments: Sequence[tuple[str, Sequence[Sequence[tuple[int, int]]]]], out: Path) -> str:
    """``out/order_tau.{md,tsv}``: how much each output reorders its source, from each (source, output)
    alignment (the reference's first, then the systems' own, e.g. from ``ordo align --model``): mean and
    median Kendall τ, the share of monotone pairs (τ = 1) and the mean fuzzy reordering score."""
    rows: list[list[Cell]] = []
    for name, links in alignments:
        taus = [alignment_tau(pair) for pair in links]
        rows.append([name, len(taus), statistics.fmean(taus), statistics.median(taus),
                     100 * sum(tau == 1.0 for tau in taus) / len(taus),
                     statistics.fmean(fuzzy_reordering(pair) for pair in links)])
    headers = ["output", "pairs", "mean τ", "median τ", "monotone %", "mean fuzzy reordering"]
    return write_tables(out / "order_tau", headers, rows)
