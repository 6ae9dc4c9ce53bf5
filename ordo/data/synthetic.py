"""A synthetic language pair with systematic long-distance reordering: SVO English into SOV "Japanese".

The source is a small fragment of English; the target is an invented verb-final language with case
markers and postpositions. Both sides come from one grammar whose rules build the source and the
target together, so every pair is consistent and the word alignment is known by construction.

Grammar (source order on the left, target order on the right; ``*`` = zero or more, ``[]`` = optional)::

    S    -> NP_subj VP .                  NP_subj ga VP .
    VP   -> V [NP_obj] [PP]               [PP] [NP_obj o] V
    NP   -> Det Adj* N [RC]               [RC] Det Adj* N
    RC   -> that VP                       VP REL
    PP   -> Prep NP                       NP Postp

The reorderings this produces:

- the verb moves from after the subject to the end of its clause (SVO -> SOV), past the object, the
  prepositional phrase and every relative clause inside them;
- a prepositional phrase moves from after the object to before it, and the preposition becomes a
  postposition after its noun phrase;
- a relative clause moves from after its head noun to before the whole noun phrase (determiner
  included), with its own verb last and the relativiser ``su`` (the translation of ``that``) closing it;
- the two rules nest: a relative clause is a full verb phrase, so its object or prepositional phrase
  may carry a relative clause of its own, giving nested, centre-embedded target structures.

Nouns are singular or plural; English present-tense verbs agree with their subject (``chases`` /
``chase``), the target marks plural on the noun (``bako`` / ``bakora``) and tense on the verb
(``oka-ru`` present, ``oka-ta`` past, written as one word). Every source word has exactly one
translation in :data:`LEXICON` (a few forms share one: ``chase``/``chases``, ``a``/``an``); the target
adds only the case markers ``ga`` (subject) and ``o``
(object), which have no source counterpart and are unaligned. Target words are invented strings, so no
target word is a copy of a source word except the final ``.``.

Depth: the main clause is at depth 0 and a relative clause is one deeper than the clause holding its
noun. A noun phrase in a clause of depth ``d`` gets a relative clause with probability
``RELATIVE_CLAUSE_PROB[d]`` while ``d < max_depth``. Pairs whose sides fall outside
``MIN_LENGTH``..``MAX_LENGTH`` tokens (``.`` included) are redrawn.

The source sentence determines its target, and the target determines the source: where the source is
ambiguous (a prepositional phrase after a relative clause may belong to either verb phrase), both
readings give the same target string.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ordo.data.textio import atomic_write

__all__ = [
    "LEXICON",
    "MAX_LENGTH",
    "MIN_LENGTH",
    "SOURCE_WORD_CLASS",
    "TARGET_MARKERS",
    "TARGET_WORD_CLASS",
    "generate_corpus",
    "generate_pair",
    "generate_pair_with_alignment",
    "write_corpus",
]

MIN_LENGTH = 4
MAX_LENGTH = 25

# Probabilities of the optional parts of the grammar.
RELATIVE_CLAUSE_PROB = (0.3, 0.2, 0.15)  # per clause depth; beyond the tuple the last value applies
TRANSITIVE_PROB = 0.75  # a verb phrase has an object
PP_PROB = 0.3  # a verb phrase has a prepositional phrase
PLURAL_PROB = 0.3
PAST_PROB = 0.5
ADJECTIVE_COUNT_PROBS = (0.6, 0.3, 0.1)  # 0, 1 or 2 adjectives in a noun phrase

# fmt: off
# (singular, plural, target stem); the target plural is the stem + "ra".
_NOUNS = (
    ("dog", "dogs", "bako"), ("cat", "cats", "nemu"), ("bird", "birds", "piso"),
    ("fish", "fishes", "kuda"), ("horse", "horses", "mozi"), ("farmer", "farmers", "tagu"),
    ("teacher", "teachers", "sefo"), ("child", "children", "rimo"), ("king", "kings", "zoda"),
    ("queen", "queens", "luna"), ("doctor", "doctors", "heki"), ("baker", "bakers", "pamu"),
    ("sailor", "sailors", "wazo"), ("student", "students", "gimo"), ("soldier", "soldiers", "hota"),
    ("girl", "girls", "fesu"), ("boy", "boys", "dopi"), ("woman", "women", "yamu"),
    ("man", "men", "kesa"), ("friend", "friends", "nobi"), ("neighbour", "neighbours", "tisu"),
    ("house", "houses", "raku"), ("garden", "gardens", "sobi"), ("river", "rivers", "mire"),
    ("forest", "forests", "dazu"), ("city", "cities", "kopa"), ("village", "villages", "zemi"),
    ("boat", "boats", "fupa"), ("car", "cars", "ruki"), ("book", "books", "hasi"),
    ("letter", "letters", "gozu"), ("apple", "apples", "mipu"), ("box", "boxes", "teru"),
    ("table", "tables", "kaso"), ("chair", "chairs", "bume"), ("window", "windows", "pedo"),
    ("door", "doors", "sako"), ("hill", "hills", "wapi"), ("road", "roads", "gato"),
    ("tree", "trees", "zuno"),
)
# (plural / base form, third person singular, past, target stem); target present = stem + "ru",
# past = stem + "ta".
_TRANSITIVE_VERBS = (
    ("chase", "chases", "chased", "oka"), ("see", "sees", "saw", "miso"),
    ("find", "finds", "found", "haku"), ("follow", "follows", "followed", "tuzi"),
    ("help", "helps", "helped", "tasu"), ("visit", "visits", "visited", "hobo"),
    ("push", "pushes", "pushed", "osi"), ("carry", "carries", "carried", "moti"),
    ("watch", "watches", "watched", "naga"), ("paint", "paints", "painted", "eka"),
    ("hold", "holds", "held", "dake"), ("feed", "feeds", "fed", "yasi"),
    ("call", "calls", "called", "yobi"), ("catch", "catches", "caught", "tora"),
)
_INTRANSITIVE_VERBS = (
    ("sleep", "sleeps", "slept", "nemo"), ("run", "runs", "ran", "kake"),
    ("sing", "sings", "sang", "uta"), ("wait", "waits", "waited", "mati"),
    ("dance", "dances", "danced", "odo"), ("laugh", "laughs", "laughed", "wara"),
)
_ADJECTIVES = (
    ("big", "oki"), ("small", "tisa"), ("red", "aka"), ("old", "furu"), ("young", "waka"),
    ("happy", "ureu"), ("quiet", "sizu"), ("clever", "kasi"), ("tall", "taka"), ("dark", "kura"),
    ("brave", "isa"), ("lazy", "dara"), ("angry", "ika"), ("green", "mido"), ("tired", "tuka"),
)
_SINGULAR_DETERMINERS = ("the", "a", "every", "this")
_PLURAL_DETERMINERS = ("the", "some", "these", "many")
_DETERMINERS = (
    ("the", "ze"), ("a", "hen"), ("an", "hen"), ("every", "moro"), ("this", "kore"),
    ("some", "iku"), ("these", "sora"), ("many", "ooi"),
)
_PREPOSITIONS = (
    ("in", "de"), ("on", "ue"), ("near", "soba"), ("with", "tomo"),
    ("behind", "ura"), ("under", "sita"), ("from", "kara"),
)
# fmt: on
_RELATIVISER = ("that", "su")
_PERIOD = "."
SUBJECT_MARKER = "ga"
OBJECT_MARKER = "o"
TARGET_MARKERS = frozenset({SUBJECT_MARKER, OBJECT_MARKER})
_PLURAL_SUFFIX = "ra"
_PRESENT_SUFFIX = "ru"
_PAST_SUFFIX = "ta"


def _build_lexicon() -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """The translation of every source word and the word class of every source and target word."""
    lexicon: dict[str, str] = {}
    source_class: dict[str, str] = {}
    target_class: dict[str, str] = {}

    def add(src: str, tgt: str, word_class: str) -> None:
        lexicon[src] = tgt
        source_class[src] = word_class
        target_class[tgt] = "postp" if word_class == "prep" else word_class

    for singular, plural, stem in _NOUNS:
        add(singular, stem, "noun")
        add(plural, stem + _PLURAL_SUFFIX, "noun")
    for base, third_singular, past, stem in _TRANSITIVE_VERBS + _INTRANSITIVE_VERBS:
        add(base, stem + _PRESENT_SUFFIX, "verb")
        add(third_singular, stem + _PRESENT_SUFFIX, "verb")
        add(past, stem + _PAST_SUFFIX, "verb")
    for src, tgt in _ADJECTIVES:
        add(src, tgt, "adj")
    for src, tgt in _DETERMINERS:
        add(src, tgt, "det")
    for src, tgt in _PREPOSITIONS:
        add(src, tgt, "prep")
    add(*_RELATIVISER, "rel")
    add(_PERIOD, _PERIOD, "punct")
    for marker in TARGET_MARKERS:
        target_class[marker] = "case"
    return lexicon, source_class, target_class


LEXICON, SOURCE_WORD_CLASS, TARGET_WORD_CLASS = _build_lexicon()
"""``LEXICON``: source word -> its one target translation. ``SOURCE_WORD_CLASS`` / ``TARGET_WORD_CLASS``:
word -> one of ``noun verb adj det prep rel punct`` (source) or ``noun verb adj det postp rel punct case``
(target; ``case`` is the markers ``ga`` and ``o``)."""

# A token is a word and the id of its alignment link (None for a target-only marker).
_Token = tuple[str, int | None]


@dataclass
class _Phrase:
    """A source and a target token list built together by one grammar rule."""

    src: list[_Token]
    tgt: list[_Token]


class _Derivation:
    """One random derivation of the grammar in the module docstring.

    Every method builds the source and the target of one rule at once; aligned words share a link id.
    """

    def __init__(self, rng: random.Random, max_depth: int) -> None:
        self.rng = rng
        self.max_depth = max_depth
        self._link_ids: Iterator[int] = itertools.count()

    def word(self, src: str) -> _Phrase:
        """A source word and its lexicon translation, linked."""
        link = next(self._link_ids)
        return _Phrase([(src, link)], [(LEXICON[src], link)])

    def sentence(self) -> _Phrase:
        """``S -> NP_subj VP .`` / ``NP_subj ga VP .``"""
        subject, plural = self.noun_phrase(depth=0)
        verb_phrase = self.verb_phrase(depth=0, plural_subject=plural)
        period = self.word(_PERIOD)
        return _Phrase(
            src=subject.src + verb_phrase.src + period.src,
            tgt=subject.tgt + [(SUBJECT_MARKER, None)] + verb_phrase.tgt + period.tgt,
        )

    def noun_phrase(self, depth: int) -> tuple[_Phrase, bool]:
        """``NP -> Det Adj* N [RC]`` / ``[RC] Det Adj* N``; also returns whether the noun is plural.

        Args:
            depth: depth of the clause this noun phrase belongs to; a relative clause on it is one deeper.
        """
        rng = self.rng
        plural = rng.random() < PLURAL_PROB
        det_word = rng.choice(_PLURAL_DETERMINERS if plural else _SINGULAR_DETERMINERS)
        num_adjectives = rng.choices(range(len(ADJECTIVE_COUNT_PROBS)), weights=ADJECTIVE_COUNT_PROBS)[0]
        adjective_words = [src for src, _ in rng.sample(_ADJECTIVES, num_adjectives)]
        singular, plural_form, _ = rng.choice(_NOUNS)
        noun_word = plural_form if plural else singular
        if det_word == "a" and (adjective_words + [noun_word])[0][0] in "aeiou":
            det_word = "an"
        det = self.word(det_word)
        adjectives = [self.word(src) for src in adjective_words]
        noun = self.word(noun_word)
        head_src = det.src + [tok for adj in adjectives for tok in adj.src] + noun.src
        head_tgt = det.tgt + [tok for adj in adjectives for tok in adj.tgt] + noun.tgt
        if (
            depth < self.max_depth
            and rng.random() < RELATIVE_CLAUSE_PROB[min(depth, len(RELATIVE_CLAUSE_PROB) - 1)]
        ):
            clause = self.relative_clause(depth + 1, plural_head=plural)
            return _Phrase(head_src + clause.src, clause.tgt + head_tgt), plural
        return _Phrase(head_src, head_tgt), plural

    def verb_phrase(self, depth: int, plural_subject: bool) -> _Phrase:
        """``VP -> V [NP_obj] [PP]`` / ``[PP] [NP_obj o] V``

        Args:
            depth: depth of the clause this verb phrase heads.
            plural_subject: whether the subject is plural (English present-tense agreement).
        """
        rng = self.rng
        transitive = rng.random() < TRANSITIVE_PROB
        base, third_singular, past, _ = rng.choice(_TRANSITIVE_VERBS if transitive else _INTRANSITIVE_VERBS)
        if rng.random() < PAST_PROB:
            verb = self.word(past)
        else:
            verb = self.word(base if plural_subject else third_singular)
        src, tgt = list(verb.src), []
        if transitive:
            obj, _ = self.noun_phrase(depth)
            src += obj.src
            tgt += obj.tgt + [(OBJECT_MARKER, None)]
        if rng.random() < PP_PROB:
            prepositional = self.prepositional_phrase(depth)
            src += prepositional.src
            tgt = prepositional.tgt + tgt
        return _Phrase(src, tgt + verb.tgt)

    def relative_clause(self, depth: int, plural_head: bool) -> _Phrase:
        """``RC -> that VP`` / ``VP REL``: a subject relative clause; its verb agrees with the head noun.

        Args:
            depth: depth of this clause (1 for a relative clause in the main clause).
            plural_head: whether the modified noun is plural.
        """
        relativiser = self.word(_RELATIVISER[0])
        verb_phrase = self.verb_phrase(depth, plural_subject=plural_head)
        return _Phrase(relativiser.src + verb_phrase.src, verb_phrase.tgt + relativiser.tgt)

    def prepositional_phrase(self, depth: int) -> _Phrase:
        """``PP -> Prep NP`` / ``NP Postp``

        Args:
            depth: depth of the clause holding the phrase.
        """
        preposition = self.word(self.rng.choice(_PREPOSITIONS)[0])
        noun_phrase, _ = self.noun_phrase(depth)
        return _Phrase(preposition.src + noun_phrase.src, noun_phrase.tgt + preposition.tgt)


def generate_pair_with_alignment(
    rng: random.Random, max_depth: int = 2
) -> tuple[str, str, list[tuple[int, int]]]:
    """Draw one sentence pair and its gold word alignment.

    Every source word is aligned to exactly one target word, its :data:`LEXICON` translation; the
    target case markers ``ga`` and ``o`` are unaligned.

    Args:
        rng: source of randomness (the only one used).
        max_depth: deepest relative-clause nesting allowed (0 = no relative clauses).

    Returns:
        ``(source, target, alignment)``: space-separated lowercased words ending in ``.``, and the
        links ``(source_index, target_index)`` (0-based), sorted by source index.
    """
    if max_depth < 0:
        raise ValueError(f"max_depth must be >= 0, got {max_depth}")
    while True:
        phrase = _Derivation(rng, max_depth).sentence()
        if MIN_LENGTH <= len(phrase.src) <= MAX_LENGTH and MIN_LENGTH <= len(phrase.tgt) <= MAX_LENGTH:
            break
    target_index = {link: j for j, (_, link) in enumerate(phrase.tgt) if link is not None}
    alignment = [(i, target_index[link]) for i, (_, link) in enumerate(phrase.src) if link is not None]
    source = " ".join(word for word, _ in phrase.src)
    target = " ".join(word for word, _ in phrase.tgt)
    return source, target, alignment


def generate_pair(rng: random.Random, max_depth: int = 2) -> tuple[str, str]:
    """Draw one ``(source, target)`` sentence pair; see :func:`generate_pair_with_alignment`."""
    source, target, _ = generate_pair_with_alignment(rng, max_depth)
    return source, target


def _unique_pairs(
    rng: random.Random, num_pairs: int, max_depth: int, seen_src: set[str], seen_tgt: set[str]
) -> list[tuple[str, str]]:
    """Draw ``num_pairs`` pairs whose source and target are both unseen, adding them to the seen sets."""
    if num_pairs < 0:
        raise ValueError(f"number of pairs must be >= 0, got {num_pairs}")
    pairs: list[tuple[str, str]] = []
    max_draws = 100 * num_pairs + 1000
    for _ in range(max_draws):
        if len(pairs) == num_pairs:
            return pairs
        source, target = generate_pair(rng, max_depth)
        if source in seen_src or target in seen_tgt:
            continue
        seen_src.add(source)
        seen_tgt.add(target)
        pairs.append((source, target))
    if len(pairs) == num_pairs:
        return pairs
    raise ValueError(f"found only {len(pairs)} distinct pairs of {num_pairs} in {max_draws} draws")


def generate_corpus(num_pairs: int, seed: int, max_depth: int = 2) -> list[tuple[str, str]]:
    """Draw ``num_pairs`` distinct pairs (no source and no target sentence repeats).

    Args:
        num_pairs: how many pairs.
        seed: seeds a private ``random.Random``; the same seed gives the same corpus.
        max_depth: deepest relative-clause nesting allowed.

    Returns:
        ``(source, target)`` pairs in the order drawn.
    """
    return _unique_pairs(random.Random(seed), num_pairs, max_depth, set(), set())


def write_corpus(out_dir: Path, sizes: dict[str, int], seed: int) -> dict[str, tuple[Path, Path]]:
    """Write ``{split}.src`` and ``{split}.tgt`` (one sentence a line) for each split.

    No source or target sentence occurs twice in all the files together. Splits are drawn in the order
    of ``sizes``, each from its own stream seeded with ``seed`` and the split name, skipping sentences
    that an earlier split holds; so growing the first split (train) leaves a later split (test) unchanged
    except for the sentences the larger train set takes from it. Later splits hold fewer of the very short
    sentences, since there are few of those and earlier splits take most of them.

    Args:
        out_dir: directory to write into (created if missing).
        sizes: split name -> number of pairs, e.g. ``{"train": 20000, "valid": 300, "test": 300}``.
        seed: corpus seed.

    Returns:
        split name -> ``(source_path, target_path)``.
    """
    out_dir = Path(out_dir)
    seen_src: set[str] = set()
    seen_tgt: set[str] = set()
    paths: dict[str, tuple[Path, Path]] = {}
    for split, size in sizes.items():
        if not split or "/" in split or split.startswith("."):
            raise ValueError(f"bad split name {split!r}")
        pairs = _unique_pairs(random.Random(f"{seed}:{split}"), size, 2, seen_src, seen_tgt)
        src_path, tgt_path = out_dir / f"{split}.src", out_dir / f"{split}.tgt"
        with atomic_write(src_path) as src_file, atomic_write(tgt_path) as tgt_file:
            for source, target in pairs:
                src_file.write(source + "\n")
                tgt_file.write(target + "\n")
        paths[split] = (src_path, tgt_path)
    return paths
