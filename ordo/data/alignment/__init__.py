"""Word alignment: Pharaoh links, symmetrization, AER, aligners, and target-order positions (paper 000)."""
