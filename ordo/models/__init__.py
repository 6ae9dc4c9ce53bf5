"""Baseline model families (Transformer, attention RNN) and their building blocks."""
