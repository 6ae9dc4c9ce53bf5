"""``ordo demo`` is reproducible: the same seed gives the same translations and BLEU."""

from ordo.data.textio import read_lines
from ordo.demo import run_demo


def test_same_seed_same_result(tmp_path):
    first = run_demo(tmp_path / "a", seed=4, train_size=600, max_steps=10)
    second = run_demo(tmp_path / "b", seed=4, train_size=600, max_steps=10)
    assert first == second
    assert read_lines(tmp_path / "a" / "test.hyp") == read_lines(tmp_path / "b" / "test.hyp")
    assert len(read_lines(tmp_path / "a" / "test.hyp")) == 300
