"""The papers' analyses: system tables, swapped-word robustness, BLEU by length, plots (``ordo analyze``)."""
