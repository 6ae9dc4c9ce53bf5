"""Evaluation: ``bleu`` (sacreBLEU BLEU/chrF, multi-bleu.perl BLEU, sufficient statistics) and
``significance`` (sacreBLEU's paired tests, sign test). Import the submodules directly; this package
imports nothing so that lighter evaluation modules do not pull in sacreBLEU.
"""
