"""The five papers' methods and their comparison systems, each switched on by ``model.methods.NAME``.

Every method module registers itself here through explicit imports below; the baseline packages
(``ordo.models``, ``ordo.training``, ``ordo.decoding``) never import this package.
"""

from ordo.methods import distortion, exgre, future_cost, lattice_attn, lattice_pe, relative_pe, reorder_emb
from ordo.methods.registry import METHODS, Method, register_method

__all__ = [
    "METHODS", "Method", "distortion", "exgre", "future_cost", "lattice_attn", "lattice_pe", "register_method",
    "relative_pe", "reorder_emb",
]
