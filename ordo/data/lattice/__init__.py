"""Lattice inputs (paper 002 §3): several segmentations of each source sentence packed into one
lattice whose edges the encoder reads. ``graph`` builds lattices and their batch spans, ``segmenters``
names the segmenters, ``corpus`` the lattice directory that ``ordo prepare`` writes and ``ordo translate``
reads. The methods that use the spans are ``ordo.methods.lattice_pe`` and ``ordo.methods.lattice_attn``.
"""
