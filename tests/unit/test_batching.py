"""Token batching: budget respected, deterministic per (seed, epoch), every sentence once."""

import numpy as np

from ordo.data.batch import BOS_ID, EOS_ID, PAD_ID
from ordo.data.batching import collate, epoch_batches, index_dtype


def lengths(n=500, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(1, 40, n), rng.integers(1, 40, n)


def test_every_sentence_once_and_budget_respected():
    src, tgt = lengths()
    batches = epoch_batches(src, tgt, 300, seed=1, epoch=1)
    flat = np.concatenate(batches)
    assert sorted(flat.tolist()) == list(range(500))
    for b in batches:
        assert len(b) * (np.maximum(src[b], tgt[b]).max() + 1) <= 300


def test_same_seed_epoch_same_batches_other_epoch_differs():
    src, tgt = lengths()
    a = epoch_batches(src, tgt, 300, seed=1, epoch=1)
    b = epoch_batches(src, tgt, 300, seed=1, epoch=1)
    c = epoch_batches(src, tgt, 300, seed=1, epoch=2)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not all(np.array_equal(x, y) for x, y in zip(a, c))


def test_an_epochs_order_is_held_in_4_bytes_a_pair_below_2_to_the_31_pairs():
    src, tgt = lengths()
    assert all(b.dtype == np.int32 for b in epoch_batches(src, tgt, 300, seed=1, epoch=1))
    assert index_dtype(2**31 - 1) is np.int32 and index_dtype(2**31) is np.int64


def padded_source(batches, src):
    return sum(len(b) * (src[b].max() + 1) for b in batches)



def padded_share(batches, lengths):
    padded = sum(len(b) * (lengths[b].max() + 1) for b in batches)
    return 1 - sum(int(lengths[b].sum()) + len(b) for b in batches) / padded


def test_pairs_of_one_size_are_ordered_by_target_so_the_shorter_side_pads_little():
    rng = np.random.default_rng(5)
    tgt = rng.integers(3, 30, 20000)
    src = tgt + rng.integers(0, 12, 20000)  # Ja-En-like: the source is the longer side, the size is the source's
    batches = epoch_batches(src, tgt, 600, seed=1, epoch=1)
    assert sorted(np.concatenate(batches).tolist()) == list(range(20000))
    assert padded_share(batches, tgt) < 0.05  # sorted by size alone, a fifth of target positions pad
    assert padded_share(batches, src) < 0.05

def test_target_buckets_sorted_by_source_pad_the_source_less_within_the_target_budget():
    rng = np.random.default_rng(3)
    tgt = rng.integers(1, 40, 2000)
    src = tgt * 2 + rng.integers(0, 60, 2000)  # lattice-like sources: longer, loosely tied to the target
    plain = epoch_batches(tgt, None, 600, seed=1, epoch=1)
    bucketed = epoch_batches(tgt, None, 600, seed=1, epoch=1, bucket_width=4, sort_within=src)
    assert sorted(np.concatenate(bucketed).tolist()) == list(range(2000))
    assert all(len(b) == 1 or len(b) * (tgt[b].max() + 1) <= 600 for b in bucketed)
    assert padded_source(bucketed, src) < 0.8 * padded_source(plain, src)
    again = epoch_batches(tgt, None, 600, seed=1, epoch=1, bucket_width=4, sort_within=src)
    assert all(np.array_equal(x, y) for x, y in zip(bucketed, again))  # a resumed run rebuilds the same list


def test_bucket_width_zero_keeps_the_size_order():
    src, tgt = lengths()
    plain = epoch_batches(tgt, None, 300, seed=1, epoch=1)
    unbucketed = epoch_batches(tgt, None, 300, seed=1, epoch=1, bucket_width=0, sort_within=src)
    assert all(np.array_equal(x, y) for x, y in zip(plain, unbucketed))


def test_oversized_sentence_gets_its_own_batch():
    batches = epoch_batches(np.array([3, 100, 4]), None, 50, 1, 1, shuffle=False)
    assert [b.tolist() for b in batches] == [[0, 2], [1]]


def test_collate_adds_bos_eos_and_pads():
    batch = collate(np.array([4, 9]), [np.array([5, 6, 7]), np.array([8])], [np.array([9]), np.array([10, 11])],
                    {"pos": [np.array([2, 1, 3]), np.array([1])]})
    assert batch.src_tokens.tolist() == [[5, 6, 7, EOS_ID], [8, EOS_ID, PAD_ID, PAD_ID]]
    assert batch.src_lengths.tolist() == [4, 2]
    assert batch.tgt_in.tolist() == [[BOS_ID, 9, PAD_ID], [BOS_ID, 10, 11]]
    assert batch.tgt_out.tolist() == [[9, EOS_ID, PAD_ID], [10, 11, EOS_ID]]
    assert batch.fields["pos"].tolist() == [[2, 1, 3, 0], [1, 0, 0, 0]]
    assert batch.src_pad_mask.tolist() == [[False] * 4, [False, False, True, True]]
    assert batch.num_tgt_tokens == 5 and batch.ids.tolist() == [4, 9]
