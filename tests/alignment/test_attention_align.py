"""Alignments from a model's attention by forced decoding, and the attention plot."""

import numpy as np

from ordo.analysis.attention_align import attention_matrices
from ordo.api import load_run
from ordo.cli import main
from ordo.data.alignment.links import read_links
from ordo.data.textio import read_lines
from ordo.decoding.attention import hard_links, pool_to_words


def test_pieces_are_pooled_to_words_and_each_target_word_takes_its_best_source_word():
    attention = np.array([  # 3 target pieces (words: [0, 1], [2]) x 4 source pieces (words: [0], [1, 2], [3])
        [0.1, 0.2, 0.3, 0.4],
        [0.5, 0.1, 0.1, 0.3],
        [0.0, 0.0, 0.1, 0.9],
    ])
    words = pool_to_words(attention, [1, 2, 1], [2, 1])
    assert np.allclose(words, [[0.3, 0.35, 0.35], [0.0, 0.1, 0.9]])
    assert hard_links(words) == {(1, 0), (2, 1)}  # ties go to the first word


def test_align_from_an_rnn_model_and_plot_its_attention(rnn_run, small_data, tmp_path, capsys):
    src, tgt = tmp_path / "src.txt", tmp_path / "tgt.txt"
    src.write_text("".join(line + "\n" for line in read_lines(small_data / "test.src.txt")[:20]))
    tgt.write_text("".join(line + "\n" for line in read_lines(small_data / "test.tgt.txt")[:20]))
    out = tmp_path / "attention.align"
    assert main(["align", "--model", str(rnn_run), "--src", str(src), "--tgt", str(tgt),
                 "--out", str(out), "--checkpoint", "last"]) == 0
    links = list(read_links(out))
    assert len(links) == 20
    for sentence, target, pair in zip(read_lines(src), read_lines(tgt), links):
        assert {j for _, j in pair.sure} == set(range(len(target.split())))  # one link per target word
        assert all(i < len(sentence.split()) for i, _ in pair.sure)
    assert main(["analyze", "attention", "--run", f"rnn={rnn_run}", "--src", str(src), "--ref", str(tgt),
                 "--line", "3", "--out", str(tmp_path / "plots"), "--checkpoint", "last"]) == 0
    assert (tmp_path / "plots" / "attention_rnn.png").read_bytes()[:4] == b"\x89PNG"


def test_align_from_a_transformer_by_its_last_layers_cross_attention(train_tiny, small_data, tmp_path):
    train_tiny(steps=3, name="tf")
    src, tgt = tmp_path / "src.txt", tmp_path / "tgt.txt"
    src.write_text("".join(line + "\n" for line in read_lines(small_data / "test.src.txt")[:10]))
    tgt.write_text("".join(line + "\n" for line in read_lines(small_data / "test.tgt.txt")[:10]))
    run = load_run(tmp_path / "tf", checkpoint="last")
    for matrix, target in zip(attention_matrices(run, read_lines(src), read_lines(tgt)), read_lines(tgt)):
        assert matrix.shape[0] == len(run.tgt_vocab.encode(target)) + 1  # target pieces and EOS
        assert np.allclose(matrix.sum(axis=1), 1.0, atol=1e-5)  # each row a distribution over the source
    assert main(["align", "--model", str(tmp_path / "tf"), "--src", str(src), "--tgt", str(tgt),
                 "--out", str(tmp_path / "a"), "--checkpoint", "last"]) == 0
    for sentence, target, pair in zip(read_lines(src), read_lines(tgt), read_links(tmp_path / "a")):
        assert {j for _, j in pair.sure} == set(range(len(target.split())))
        assert all(i < len(sentence.split()) for i, _ in pair.sure)
