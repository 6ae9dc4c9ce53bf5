"""Word alignments read off a trained model's attention by forced decoding of the references (paper 003, §5).

Each reference is fed to the decoder (teacher forcing); the attention α (target piece x source piece), an RNN's
attention or a Transformer's last decoder layer's cross-attention averaged over its heads
(:func:`ordo.decoding.attention.forced_attention`), is pooled to words — mean over a target word's pieces, sum over a source word's pieces — and every target word
is linked to the source word it attends to most. EOS rows and columns are left out. Links are (source word,
target word), 0-based, as ``ordo evaluate-alignment`` reads them.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch

from ordo.api import LoadedRun
from ordo.data.alignment.links import Link, split_words
from ordo.data.alignment.reorder_field import pieces_per_word
from ordo.data.batching import collate, epoch_batches
from ordo.decoding.attention import forced_attention, hard_links, pool_to_words
from ordo.errors import ConfigError, InputError


def refuse_lattice_run(run: LoadedRun, where: str) -> None:
    """Refuse a run trained on lattices for word-level attention (``ordo align --model``, ``analyze attention``):
    its attention is over lattice edges, not the source's pieces or words.

    Raises:
        ConfigError: naming ``where`` (the run as the user gave it).
    """
    if run.lattice is not None:
        raise ConfigError(f"{where}: a lattice run's attention is over lattice edges, not the source's words, so it "
                          "gives no word links or attention matrix over them (word links: ordo align --aligner)")


@torch.inference_mode()
def attention_matrices(run: LoadedRun, sources: list[str], targets: list[str], max_tokens: int = 4000,
                       files: tuple[str, str] = ("source", "target"), first_line: int = 1) -> Iterator[np.ndarray]:
    """The (target pieces + EOS, source pieces + EOS) attention of every pair under forced decoding, in order;
    ``files`` name the sources' and the targets' file, whose line ``first_line`` the first pair is, in errors.

    Raises:
        InputError: when the model shows no attention (no cross-attention module and no alignments), or a side of
            a pair is longer than a Transformer's positions, naming its file and line.
    """
    src_rows = run.encode_inputs(sources, files[0], first_line=first_line)[0]
    tgt_rows = run.encode_targets(targets, files[1], first_line)
    lengths = np.array([len(r) for r in src_rows]), np.array([len(r) for r in tgt_rows])
    found: dict[int, np.ndarray] = {}
    for indices in epoch_batches(*lengths, max_tokens, 0, 0, shuffle=False):
        batch = collate(indices, [src_rows[i] for i in indices], [tgt_rows[i] for i in indices]).to(run.device)
        attention, _ = forced_attention(run.model, batch)
        if attention is None:
            raise InputError("this model shows no attention to align with")
        weights = attention.cpu().numpy()  # (B, T, S)
        for row, index in enumerate(indices.tolist()):
            found[index] = weights[row, : lengths[1][index] + 1, : lengths[0][index] + 1]
    for index in range(len(sources)):
        yield found.pop(index)


def align_with_model(run: LoadedRun, sources: list[str], targets: list[str],
                     files: tuple[str, str] = ("source", "target")) -> Iterator[set[Link]]:
    """Word links of every (source, reference) pair from the model's attention (see the module docstring);
    ``files`` name the two sides' files in errors."""
    for index, attention in enumerate(attention_matrices(run, sources, targets, files=files)):
        src_counts = pieces_per_word(run.src_vocab.pieces(run.src_vocab.encode(sources[index])))
        tgt_counts = pieces_per_word(run.tgt_vocab.pieces(run.tgt_vocab.encode(targets[index])))
        if len(src_counts) != len(split_words(sources[index])) or len(tgt_counts) != len(split_words(targets[index])):
            yield set()  # the pieces do not split into the text's words (normalization); no links
            continue
        yield hard_links(pool_to_words(attention[:-1, :-1], src_counts, tgt_counts))
