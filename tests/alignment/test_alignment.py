"""Pharaoh links, symmetrization, AER and target-order positions on hand-made cases."""

import pytest

from ordo.data.alignment.links import SentenceLinks, check_range, format_links, parse_links, read_links
from ordo.data.alignment.symmetrize import grow_diag_final_and, intersection, union
from ordo.data.alignment.target_order import piece_positions, reorder_words, target_order
from ordo.errors import InputError
from ordo.evaluation.aer import alignment_error_rate


def test_parse_sure_and_possible_links_one_and_zero_based():
    gold = parse_links("1-2 2p1 3-3", "gold:1", one_based=True)
    assert gold.sure == {(0, 1), (2, 2)} and gold.possible == {(0, 1), (1, 0), (2, 2)}
    assert parse_links("0-0 1-2", "hyp:1").sure == {(0, 0), (1, 2)}
    assert format_links({(1, 2), (0, 0)}) == "0-0 1-2"


def test_bad_links_name_the_file_and_line(tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("0-0\n0-1 x\n")
    with pytest.raises(InputError, match=r"a.txt:2: 'x' is not an alignment link"):
        list(read_links(path))
    with pytest.raises(InputError, match="gold:3: '0-1': positions are 1-based"):
        parse_links("0-1", "gold:3", one_based=True)
    with pytest.raises(InputError, match="here: link 3-0 is outside a pair of 3 and 2 words"):
        check_range({(3, 0)}, 3, 2, "here")


def test_intersection_union_and_grow_diag_final_and():
    forward = {(0, 0), (1, 1), (2, 3), (3, 3)}
    backward = {(0, 0), (1, 1), (1, 2), (3, 3), (4, 5)}
    assert intersection(forward, backward) == {(0, 0), (1, 1), (3, 3)}
    assert union(forward, backward) == forward | backward
    # grow: (1, 2) neighbours (1, 1) and target 2 is unaligned; (2, 3) neighbours (3, 3) and source 2 is
    # unaligned. final-and: (4, 5) has both words unaligned.
    assert grow_diag_final_and(forward, backward) == {(0, 0), (1, 1), (1, 2), (2, 3), (3, 3), (4, 5)}


def test_grow_diag_does_not_add_links_between_two_aligned_words():
    forward = {(0, 0), (1, 1)}
    backward = {(0, 0), (1, 1), (0, 1)}
    assert grow_diag_final_and(forward, backward) == {(0, 0), (1, 1)}


def test_aer_of_a_hand_case():
    gold = [SentenceLinks({(0, 0), (1, 1)}, {(0, 0), (1, 1), (1, 2)}), SentenceLinks({(0, 1)}, {(0, 1)})]
    hyps = [{(0, 0), (1, 2), (2, 2)}, {(0, 1)}]
    result = alignment_error_rate(hyps, gold)
    # |A| = 4, |S| = 3, |A ∩ S| = 2, |A ∩ P| = 3 -> AER = 1 - 5/7
    assert result.aer == pytest.approx(1 - 5 / 7)
    assert result.precision == pytest.approx(3 / 4) and result.recall == pytest.approx(2 / 3)
    assert alignment_error_rate([{(0, 0), (1, 1)}], gold[:1]).aer == 0.0
    with pytest.raises(InputError, match="1 hypothesis alignments but 2 gold"):
        alignment_error_rate(hyps[:1], gold)


def test_target_order_moves_aligned_words_and_keeps_unaligned_slots():
    # SVO -> SOV: "I(0) eat(1) apples(2)" aligned to "I(0) apples(1) eat(2)".
    assert target_order(3, {(0, 0), (1, 2), (2, 1)}) == [0, 2, 1]
    # word 1 unaligned keeps slot 1; aligned words 0, 2, 3 fill slots 0, 2, 3 by key: 3 (0.0), 0 (1.0), 2 (2.0)
    assert target_order(4, {(0, 1), (2, 2), (3, 0)}) == [2, 1, 3, 0]


def test_many_to_one_uses_the_mean_target_position_and_ties_keep_source_order():
    # word 0 -> targets {0, 4}: key 2.0; word 1 -> 1; word 2 -> 3: order 1, 0, 2
    assert target_order(3, {(0, 0), (0, 4), (1, 1), (2, 3)}) == [1, 0, 2]
    # words 0 and 1 both align to target 2 (tie): they keep their relative order, after word 2 (target 0)
    assert target_order(3, {(0, 2), (1, 2), (2, 0)}) == [1, 2, 0]


def test_target_order_is_a_permutation_and_reorders_words():
    slots = target_order(5, {(0, 3), (1, 0), (3, 1)})
    assert sorted(slots) == list(range(5))
    assert reorder_words(["a", "b", "c", "d", "e"], slots) == ["b", "d", "c", "a", "e"]


def test_pieces_follow_their_word_and_keep_inner_order():
    # words: a (2 pieces), b (1), c (3); target order puts c, a, b
    assert piece_positions([1, 2, 0], [2, 1, 3]) == [3, 4, 5, 0, 1, 2]


def test_words_are_split_on_ascii_spaces_only_and_aligners_see_the_same_count():
    from ordo.data.alignment.aligners import _aligner_line
    from ordo.data.alignment.links import split_words

    text = "足利 \u3000 義満  x\u3000y"
    assert split_words(text) == ["足利", "\u3000", "義満", "x\u3000y"]
    assert _aligner_line(text).split() == ["足利", "_", "義満", "x_y"]
    assert _aligner_line("   ") == "<empty>"
