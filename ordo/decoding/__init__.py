"""Decoding: greedy and beam search over the ``Seq2SeqModel`` protocol (``search``) and batched
translation of many sentences (``translator``)."""

from ordo.decoding.search import Hypothesis, beam_search, greedy_search, max_output_lengths

__all__ = ["Hypothesis", "beam_search", "greedy_search", "max_output_lengths"]
