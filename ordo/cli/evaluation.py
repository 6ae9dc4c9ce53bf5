"""The verbs that score systems' outputs: ``ordo evaluate`` (BLEU, chrF, RIBES, significance against a
second system) and ``analyze`` (the papers' tables and plots), with the checks of their inputs."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ordo.errors import InputError, OrdoError


def run_evaluate(args: argparse.Namespace) -> None:
    """``ordo evaluate``: scores of --hyp against one --ref or several, and with --compare (one --ref) the
    significance of the difference; each file read once (a --ref of the shell's ``<(zcat F)`` is a pipe)."""
    from ordo.evaluation.bleu import corpus_scores, read_systems
    from ordo.evaluation.significance import compare_systems

    ref_paths: list[str] = args.ref
    if len(ref_paths) > 1 and (args.compare or args.ribes):
        raise OrdoError(f"{len(ref_paths)} references given: --compare and --ribes score against one --ref")
    names = ["hyp", *(["compare"] if args.compare else [])]
    systems, streams = read_systems([getattr(args, name) for name in names], ref_paths)
    lines = dict(zip(names, systems))
    report: dict[str, Any] = {name: corpus_scores(hyps, streams, tokenized_bleu=args.tokenized_bleu,
                                                  lowercase=args.lowercase) for name, hyps in lines.items()}
    if args.compare:
        report["significance"] = compare_systems(lines["hyp"], lines["compare"], streams[0], args.bootstrap_samples,
                                                 args.randomization_trials, args.lowercase)
    if args.ribes:
        _add_ribes(report, args, lines, streams[0])
    if args.json:
        print(json.dumps(report, indent=2, default=str))
        return
    for name in ("hyp", "compare"):
        if name in report:
            scores = report[name]
            line = f"{name:8s} BLEU {scores['bleu']:.2f}  chrF {scores['chrf']:.2f}"
            if "tok_bleu" in scores:
                line += f"  tokenized BLEU {scores['tok_bleu']:.2f}"
            if "ribes" in scores:
                line += f"  RIBES {scores['ribes']:.2f}"
            print(line)
    if "significance" in report:
        _print_significance(report["significance"], args)
    print(f"signature: {report['hyp']['bleu_signature']}")


def _print_significance(significance: dict[str, Any], args: argparse.Namespace) -> None:
    """The tests of ``ordo evaluate --compare``, one line each: sacreBLEU's paired tests per metric, the sign
    test, and with --ribes the bootstrap over RIBES. Every p-value is two-sided."""
    print(f"paired tests of compare against hyp (sacreBLEU; bootstrap {args.bootstrap_samples} samples, "
          f"approximate randomization {args.randomization_trials} trials; two-sided p):")
    for name, test in significance["paired_tests"].items():
        print(f"  {name:6s} hyp {test['mean_a']:.2f} ± {test['ci_a']:.2f}  compare {test['mean_b']:.2f} ± "
              f"{test['ci_b']:.2f}  bootstrap p = {test['bootstrap_p']:.4g}  "
              f"randomization p = {test['randomization_p']:.4g}")
    sign = significance["sign_test"]
    print(f"sign test over BLEU (Collins et al. 2005): compare better on {sign['better']}, worse on "
          f"{sign['worse']}, ties {sign['ties']}; p = {sign['p_value']:.4g}")
    if "ribes_p_value" in significance:
        print(f"paired bootstrap over RIBES: p = {significance['ribes_p_value']:.4g}")


def _add_ribes(report: dict[str, Any], args: argparse.Namespace, systems: dict[str, list[str]],
               references: list[str]) -> None:
    """RIBES x100 of --hyp (and --compare), whose lines ``systems`` holds by name, against ``references`` into
    ``report``, and with --compare its paired bootstrap p."""
    from ordo.evaluation.order import ribes_tokens, sentence_ribes
    from ordo.evaluation.significance import paired_bootstrap_mean

    refs = [r.lower() for r in references] if args.lowercase else references
    sentence_scores = {}
    for name, hyps in systems.items():
        hyps = [h.lower() for h in hyps] if args.lowercase else hyps
        pairs = zip(ribes_tokens(hyps, args.tokenized_bleu), ribes_tokens(refs, args.tokenized_bleu))
        sentence_scores[name] = [sentence_ribes(ref.split(), hyp.split()) for hyp, ref in pairs]
        report[name]["ribes"] = 100 * sum(sentence_scores[name]) / len(sentence_scores[name])
    if "significance" in report:
        report["significance"]["ribes_p_value"] = paired_bootstrap_mean(
            sentence_scores["hyp"], sentence_scores["compare"], args.bootstrap_samples)


def _named(items: list[str], flag: str, seeds: bool = False) -> list[tuple[str, Path]]:
    """``NAME=PATH`` arguments as (name, path) pairs; a name given twice is an error (its tables, plots and
    outputs would hold one system under that name), unless ``seeds``: then runs under one name are that system's
    seeds."""
    pairs: list[tuple[str, Path]] = []
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise OrdoError(f"{flag} {item}: expected NAME=PATH")
        if name in dict(pairs) and not seeds:
            raise OrdoError(f"{flag} {item}: the name {name!r} is given twice")
        pairs.append((name, Path(path)))
    return pairs


def _out_folder(out: str) -> Path:
    """``--out`` as a folder, made now, so that one that cannot be (a file, a path under a file) is named before
    any system translates."""
    path = Path(out)
    if path.exists() and not path.is_dir():
        raise InputError(f"--out {out}: is a file, not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InputError(f"--out {out}: cannot make the folder ({err.strerror or err})") from None
    return path


def _refuse_shared_seed_files(baselines: list[str], systems: list[str]) -> None:
    """Refuse a file given both as a ``--baseline`` and as a ``--system`` seed: one run cannot be a seed of both
    systems, and the test would count it on each side."""
    for system in systems:
        for baseline in baselines:
            if Path(system).resolve() == Path(baseline).resolve():
                raise InputError(f"--system {system}: the same file as --baseline {baseline}; give each system's "
                                 "own outputs")


def _seed_run_environments(args: argparse.Namespace) -> str:
    """``analyze seeds``' check of the runs behind its files (:func:`ordo.provenance.check_seed_runs`), or
    ``not checked`` without ``--baseline-run`` and ``--system-run``.

    Raises:
        InputError: when the runs given do not pair with the files one to one, or differ (without --allow-mixed).
    """
    from ordo.provenance import check_seed_runs

    if not args.baseline_run and not args.system_run:
        return "not checked (no --baseline-run, --system-run)"
    for flag, runs, files in (("--baseline-run", args.baseline_run, args.baseline),
                              ("--system-run", args.system_run, args.system)):
        if len(runs) != len(files):
            raise InputError(f"{flag}: {len(runs)} runs for {len(files)} output files; give the run of each file, "
                             "in the same order")
    return check_seed_runs([Path(run) for run in args.baseline_run], [Path(run) for run in args.system_run],
                           args.allow_mixed)


def _checked_runs(items: list[str], checkpoint: str, seeds: bool = False) -> list[tuple[str, Path]]:
    """``--run NAME=RUN_DIR`` arguments as (name, run directory) pairs, each a run directory with the
    ``checkpoint`` asked for, so that a later run without it is named before the first one translates; with
    ``seeds``, runs under one name are that system's seeds (:func:`_named`).

    Raises:
        CheckpointError: naming the ``--run`` that has no config.yaml or no such checkpoint.
    """
    from ordo.api import resolve_checkpoint
    from ordo.errors import CheckpointError

    runs = _named(items, "--run", seeds)
    for name, run_dir in runs:
        where = f"--run {name}={run_dir}"
        if not (run_dir / "config.yaml").is_file():
            raise CheckpointError(f"{where}: not an ordo run directory (no config.yaml)")
        try:
            path = resolve_checkpoint(run_dir, checkpoint)
        except CheckpointError as err:
            raise CheckpointError(f"{where}: {err}") from None
        if not path.is_file():
            raise CheckpointError(f"{where}: {path}: no such checkpoint")
    return runs


def run_analyze(args: argparse.Namespace) -> None:
    """``ordo analyze systems|robustness|length|order|attention|seeds|sim|contrastive``: tables (.md, .tsv) and
    plots under --out."""
    from ordo.analysis import report
    from ordo.analysis.plots import pyplot
    from ordo.api import setup_logging
    from ordo.evaluation.bleu import read_systems

    setup_logging()
    if args.analysis in ("robustness", "length", "order", "attention"):
        pyplot()  # without matplotlib these fail here, before any system translates
    if args.analysis == "sim":
        runs = _checked_runs(args.run, args.checkpoint)
        print(report.sim_report(runs, Path(args.data), args.split, args.checkpoint, args.device))
        return
    if args.analysis == "seeds":
        _refuse_shared_seed_files(args.baseline, args.system)
        seed_outputs, (refs,) = read_systems([*args.baseline, *args.system], [args.ref])  # checks each, reads once
        base_runs = list(zip(args.baseline, seed_outputs[:len(args.baseline)]))
        system_runs = list(zip(args.system, seed_outputs[len(args.baseline):]))
        from ordo.evaluation.seeds import bleu_metric, ribes_metric

        metric = (ribes_metric if args.metric == "ribes" else bleu_metric)(args.tokenized_bleu)
        print(report.seeds_report(base_runs, system_runs, refs, _out_folder(args.out), metric, args.target_gain,
                                  _seed_run_environments(args)))
        return
    hyp_paths = _named(args.hyp, "--hyp") if args.analysis in ("order", "length") else []
    (sources, *hyp_lines), (refs,) = read_systems([args.src, *(path for _, path in hyp_paths)], [args.ref])
    systems = [(name, lines) for (name, _), lines in zip(hyp_paths, hyp_lines)]
    out = _out_folder(args.out)
    if args.analysis == "order":
        from ordo.evaluation.order import alignment_tau

        outputs = dict(systems)
        alignments = [("reference", _read_test_links(Path(args.align), sources, refs, args.ref))]
        for name, path in _named(args.hyp_align, "--hyp-align"):
            if name not in outputs:
                raise InputError(f"--hyp-align {name}={path}: no --hyp is named {name!r}")
            alignments.append((name, _read_test_links(path, sources, outputs[name], args.ref)))
        taus = [alignment_tau(links) for links in alignments[0][1]]
        print(report.order_report(systems, refs, taus, out, args.tokenized_bleu, args.edges))
        if args.hyp_align:
            print(report.order_tau_report(alignments, out))
        return
    if args.analysis == "length":
        print(report.length_report(systems, sources, refs, out, args.tokenized_bleu, args.groups, args.bounds,
                                   args.unit))
        return
    runs = _checked_runs(args.run, args.checkpoint, seeds=args.analysis == "contrastive")
    if args.analysis == "contrastive":
        links = _read_test_links(Path(args.align), sources, refs, args.ref) if args.align else None
        print(report.contrastive_report(runs, sources, refs, out, args.seed, args.checkpoint, args.device,
                                        (args.src, args.ref), links))
        return
    if args.analysis == "attention":
        for path in report.attention_plots(runs, sources, refs, args.line, out, args.checkpoint, args.device,
                                           (args.src, args.ref)):
            print(path)
        return
    decode = {"beam_size": args.beam} if args.beam else {}
    if args.analysis == "systems":
        print(report.systems_report(runs, sources, refs, out, args.checkpoint, args.tokenized_bleu, args.device,
                                    **decode))
    else:
        fractions = [p / 100 for p in range(0, 101, args.step)]
        print(report.robustness_report(runs, sources, refs, out, fractions, args.seed, args.checkpoint,
                                       args.tokenized_bleu, args.device, **decode))


def _read_test_links(path: Path, sources: list[str], targets: list[str], ref: str) -> list[list[tuple[int, int]]]:
    """The sure links of every line of a Pharaoh file that must have one line per test pair of ``ref``, each
    link within the words of its ``sources`` line and its ``targets`` line (the reference or a system's output).

    Raises:
        InputError: naming ``path`` for another line count, and its line for a link past the end of a pair.
    """
    from ordo.data.alignment.links import check_range, read_links, split_words

    links = [sorted(sentence.sure) for sentence in read_links(path)]
    if len(links) != len(sources):
        raise InputError(f"{path}: {len(links)} lines of links for {len(sources)} test pairs in {ref}")
    for number, (pair, source, target) in enumerate(zip(links, sources, targets), 1):
        check_range(pair, len(split_words(source)), len(split_words(target)), f"{path}:{number}")
    return links
