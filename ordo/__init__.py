"""ordo: neural machine translation with a focus on word order."""

__version__ = "0.1.0"
