"""The data side: text I/O (``textio``), vocabularies (``vocab``), the binarized corpus (``corpus``), batches and
token batching (``batch``, ``batching``), raw source lines as model inputs (``source``), the pipeline behind
``ordo prepare`` (``prepare``), lattices (``lattice``, paper 002), word alignments and target-order positions
(``alignment``, paper 000), and the synthetic SVO->SOV pair (``synthetic``). Nothing here imports a model."""
