"""The word-alignment verbs: ``ordo align`` (an aligner, or a model's attention), ``evaluate-alignment``
(AER) and ``reorder`` (sources in target word order)."""

from __future__ import annotations

import argparse


def run_align(args: argparse.Namespace) -> None:
    """``ordo align``: with an aligner, or from a trained model's attention (``--model``)."""
    from ordo.api import setup_logging
    from ordo.data.alignment.aligners import write_alignment

    setup_logging()
    if args.model:
        from ordo import api
        from ordo.analysis.attention_align import align_with_model, refuse_lattice_run
        from ordo.data.alignment.links import format_links
        from ordo.data.textio import atomic_write
        from ordo.evaluation.bleu import read_hyp_ref

        sources, targets = read_hyp_ref(args.src, args.tgt)
        run = api.load_run(args.model, args.checkpoint, args.device)
        refuse_lattice_run(run, args.model)
        links = align_with_model(run, sources, targets, (args.src, args.tgt))
        with atomic_write(args.out) as handle:
            handle.writelines(format_links(pair) + "\n" for pair in links)
        print(f"{len(sources)} alignments from {args.model}'s attention -> {args.out}")
        return
    print(f"{write_alignment(args.src, args.tgt, args.out, args.aligner, args.symmetrization)} alignments -> {args.out}")


def run_evaluate_alignment(args: argparse.Namespace) -> None:
    """``ordo evaluate-alignment``: AER (Och & Ney 2003) of --hyp against --gold."""
    from ordo.evaluation.aer import score_alignment_files

    result = score_alignment_files(args.hyp, args.gold, not args.gold_zero_based, args.first)
    print(f"AER {100 * result.aer:.2f}  precision {100 * result.precision:.2f}  recall {100 * result.recall:.2f}"
          f"  ({result.sentences} sentences)")


def run_reorder(args: argparse.Namespace) -> None:
    """``ordo reorder``: each source line with its words moved to their target-order slots."""
    from ordo.data.alignment.links import check_range, paired_lines, read_links, split_words
    from ordo.data.alignment.target_order import reorder_words, target_order
    from ordo.data.textio import atomic_write, iter_lines

    with atomic_write(args.out) as handle:
        pairs = paired_lines(iter_lines(args.src), read_links(args.align), (args.src, args.align))
        for (number, text), links in pairs:
            words = split_words(text)
            check_range(links.sure, len(words), None, f"{args.align}:{number}")
            handle.write(" ".join(reorder_words(words, target_order(len(words), links.sure))) + "\n")
