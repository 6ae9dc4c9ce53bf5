"""Evaluation: ``bleu`` (sacreBLEU BLEU/chrF, multi-bleu.perl BLEU, sufficient statistics) and
``significance`` (sign test, paired bootstrap). Import the submodules directly; this package
imports nothing so that lighter evaluation modules do not pull in sacreBLEU.
"""
