"""Symmetrization of two directional word alignments (Och & Ney 2003; Koehn et al. 2005).

Both inputs are (source, target) links: ``forward`` from the source-to-target model, ``backward`` from the
target-to-source model with its pairs already flipped to (source, target).
"""

from __future__ import annotations

from collections.abc import Callable

from ordo.data.alignment.links import Link

NEIGHBOURS = ((-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1))


def intersection(forward: set[Link], backward: set[Link]) -> set[Link]:
    """Links both directions agree on (high precision)."""
    return forward & backward


def union(forward: set[Link], backward: set[Link]) -> set[Link]:
    """Links of either direction (high recall)."""
    return forward | backward


def grow_diag_final_and(forward: set[Link], backward: set[Link]) -> set[Link]:
    """Koehn's grow-diag-final-and: start from the intersection, grow into union links next to (incl.
    diagonally) an aligned point while one of the two words is unaligned, then add the remaining
    directional links whose source and target words are both unaligned ("final-and")."""
    links = forward & backward
    candidates = forward | backward
    aligned_src = {s for s, _ in links}
    aligned_tgt = {t for _, t in links}

    def add(link: Link) -> None:
        links.add(link)
        aligned_src.add(link[0])
        aligned_tgt.add(link[1])

    grown = True
    while grown:
        grown = False
        for src, tgt in sorted(links):
            for d_src, d_tgt in NEIGHBOURS:
                new = (src + d_src, tgt + d_tgt)
                if new in candidates and new not in links and (new[0] not in aligned_src or new[1] not in aligned_tgt):
                    add(new)
                    grown = True
    for direction in (forward, backward):
        for link in sorted(direction):
            if link[0] not in aligned_src and link[1] not in aligned_tgt:
                add(link)
    return links


SYMMETRIZATIONS: dict[str, Callable[[set[Link], set[Link]], set[Link]]] = {
    "grow-diag-final-and": grow_diag_final_and,
    "intersection": intersection,
    "union": union,
}
