"""SentencePiece vocabularies: training a model and mapping text to piece ids and back.

Every model ordo trains reserves the special ids of :mod:`ordo.data.batch`: ``PAD_ID`` 0, ``UNK_ID`` 1,
``BOS_ID`` 2, ``EOS_ID`` 3. Encoding returns pieces only; ``collate`` adds BOS/EOS.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator, Sequence
from pathlib import Path

import sentencepiece as spm

from ordo.data.batch import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from ordo.data.textio import atomic_write
from ordo.errors import ConfigError, InputError

MODEL_TYPES = ("unigram", "bpe")
_SPECIAL_IDS = frozenset((PAD_ID, BOS_ID, EOS_ID))
_TOO_FEW_CHARS = re.compile(r"smaller than required_chars\. (\d+) vs (\d+)")
_NO_CHARS = "(all_chars_count) > (0)"  # SentencePiece's failed check when its sentences hold no character
# SentencePiece's training threads, the same on every machine: its result depends on how many there are (each
# sums its share of the sentences), so a count taken from the machine gave another vocabulary, and other tokens,
# on a machine with another number of cores; 16 trained Multi30k's 8k model in 9 s on 2 cores, 2 in 12 s
SPM_THREADS = 16


def train_sentencepiece(
    text_files: list[Path],
    model_prefix: Path,
    vocab_size: int,
    model_type: str = "unigram",
    character_coverage: float = 1.0,
    input_sentence_size: int = 2_000_000,
    seed: int = 1,
) -> Path:
    """Train a SentencePiece model on plain-text files, one sentence per line.

    The model gets pad/unk/bos/eos at ids 0/1/2/3. ``vocab_size`` is an upper bound: a corpus too small
    to fill it yields a smaller vocabulary (``hard_vocab_limit=False``) instead of an error. The same files give
    the same pieces on any machine (:data:`SPM_THREADS` threads).

    Args:
        text_files: plain (not gzipped) UTF-8 files to learn from; pieces are learnt jointly over all.
        model_prefix: where to write; the result is ``<model_prefix>.model`` (and ``.vocab``, its pieces and
            scores), which records no path: the same files give the same bytes in any folder.
        vocab_size: requested number of pieces, special ones included.
        model_type: ``"unigram"`` or ``"bpe"``.
        character_coverage: share of characters the model must cover (1.0 for small alphabets,
            e.g. 0.9995 for Japanese or Chinese).
        input_sentence_size: at most this many sentences, sampled from the files, are used.
        seed: seed of SentencePiece's sentence sampling.

    Returns:
        The path of the ``.model`` file.

    Raises:
        ConfigError: for an unknown ``model_type``, or (:class:`VocabSizeTooSmall`) a ``vocab_size`` below the
            number of characters the corpus needs.
        InputError: when a training file is missing, or (:class:`NoTrainingText`) holds no character once
            normalized.
    """
    if model_type not in MODEL_TYPES:
        raise ConfigError(f"model_type: expected one of {', '.join(MODEL_TYPES)}, got {model_type!r}")
    for path in text_files:
        if not Path(path).is_file():
            raise InputError(f"{path}: no such file")
    model_prefix = Path(model_prefix)
    model = io.BytesIO()
    spm.set_random_generator_seed(seed)
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=_lines(text_files),
            model_writer=model,
            vocab_size=vocab_size,
            model_type=model_type,
            character_coverage=character_coverage,
            input_sentence_size=input_sentence_size,
            shuffle_input_sentence=True,
            hard_vocab_limit=False,
            pad_id=PAD_ID,
            unk_id=UNK_ID,
            bos_id=BOS_ID,
            eos_id=EOS_ID,
            num_threads=SPM_THREADS,
            minloglevel=2,
        )
    except RuntimeError as err:
        raise _training_error(err, vocab_size, text_files) from None
    model_path = model_prefix.with_name(model_prefix.name + ".model")
    with atomic_write(model_path, "wb", encoding=None) as handle:
        handle.write(model.getvalue())
    processor = spm.SentencePieceProcessor(model_proto=model.getvalue())
    with atomic_write(model_prefix.with_name(model_prefix.name + ".vocab")) as handle:
        handle.writelines(f"{processor.id_to_piece(i)}\t{processor.get_score(i):g}\n"
                          for i in range(processor.get_piece_size()))
    return model_path


def _lines(text_files: Sequence[str | Path]) -> Iterator[str]:
    """The lines of ``text_files``, one file after another, without their line ends: what SentencePiece reads
    from the files themselves, given as sentences so that the model does not record the files' paths (it would
    name the folder it was trained in, and differ byte for byte between two folders)."""
    for path in text_files:
        with open(path, encoding="utf-8", newline="\n") as handle:  # a lone \r stays inside its line, as there
            for line in handle:
                yield line.rstrip("\n")


class VocabSizeTooSmall(ConfigError):
    """A SentencePiece vocabulary size below the pieces the corpus's characters need.

    Attributes:
        required: that number of pieces, the smallest size that trains.
    """

    def __init__(self, message: str, required: int) -> None:
        super().__init__(message)
        self.required = required


class NoTrainingText(InputError):
    """SentencePiece found no character to learn from: every sentence of ``files`` is empty once normalized.

    Attributes:
        files: the training files, as given to :func:`train_sentencepiece`.
    """

    def __init__(self, files: Sequence[Path]) -> None:
        super().__init__(f"{' and '.join(map(str, files))}: no text for SentencePiece to learn from (every line is "
                         "empty once normalized: only spaces, control or zero-width characters)")
        self.files = list(files)


def _training_error(err: RuntimeError, vocab_size: int, text_files: Sequence[Path]) -> Exception:
    """Turn SentencePiece's "vocabulary smaller than the characters" failure into a :class:`VocabSizeTooSmall`,
    and its failure on text without characters into a :class:`NoTrainingText`."""
    if _NO_CHARS in str(err):
        return NoTrainingText(text_files)
    found = _TOO_FEW_CHARS.search(str(err))
    if found is None:
        return err
    return VocabSizeTooSmall(
        f"vocab_size: {vocab_size} is smaller than the {found.group(2)} pieces the corpus's characters "
        "need; increase vocab_size or lower character_coverage", int(found.group(2))
    )


class Vocab:
    """A loaded SentencePiece model with ordo's special ids.

    Args:
        processor: a loaded ``SentencePieceProcessor``.
        path: the ``.model`` file it was loaded from.
    """

    def __init__(self, processor: spm.SentencePieceProcessor, path: Path) -> None:
        self.processor = processor
        self.path = Path(path)

    @classmethod
    def load(cls, path: str | Path) -> Vocab:
        """Load a ``.model`` file and check its special ids.

        Args:
            path: a SentencePiece model file.

        Returns:
            The vocabulary.

        Raises:
            InputError: when the file is missing, is not a SentencePiece model, or was trained with
                other special ids than pad 0, unk 1, bos 2, eos 3.
        """
        path = Path(path)
        if not path.is_file():
            raise InputError(f"{path}: no such file (SentencePiece model)")
        processor = spm.SentencePieceProcessor()
        try:
            processor.Load(str(path))
        except (RuntimeError, OSError) as err:
            raise InputError(f"{path}: not a SentencePiece model ({err})") from None
        found = (processor.pad_id(), processor.unk_id(), processor.bos_id(), processor.eos_id())
        if found != (PAD_ID, UNK_ID, BOS_ID, EOS_ID):
            raise InputError(f"{path}: special ids pad/unk/bos/eos are {found}, ordo needs (0, 1, 2, 3)")
        return cls(processor, path)

    def __len__(self) -> int:
        """Number of pieces, special ones included."""
        return self.processor.get_piece_size()

    def encode(self, text: str) -> list[int]:
        """Piece ids of one text.

        Args:
            text: raw or pre-tokenized text.

        Returns:
            The ids, without BOS/EOS.
        """
        return self.processor.encode(text, out_type=int)

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        """Piece ids of many texts, encoded by SentencePiece's thread pool.

        Args:
            texts: raw or pre-tokenized texts.

        Returns:
            One id list per text, without BOS/EOS.
        """
        return self.processor.encode(list(texts), out_type=int)

    def decode(self, ids: Sequence[int]) -> str:
        """Detokenized text of piece ids.

        Args:
            ids: piece ids; pad, BOS and EOS ids are dropped, the unknown piece shows as ``⁇``.

        Returns:
            The text.
        """
        return self.processor.decode([int(i) for i in ids if int(i) not in _SPECIAL_IDS])

    def pieces(self, ids: Sequence[int]) -> list[str]:
        """The piece strings of ``ids`` (for inspection).

        Args:
            ids: piece ids.

        Returns:
            One piece string per id, e.g. ``"▁cat"``.
        """
        return [self.processor.id_to_piece(int(i)) for i in ids]

    def text_pieces(self, text: str) -> list[str]:
        """The pieces of one text as strings, as :meth:`encode` splits it; an unknown piece shows the characters
        it stands for (e.g. ``"▁猫"``) rather than ``<unk>``.

        Args:
            text: raw or pre-tokenized text.

        Returns:
            One piece string per id of ``encode(text)``.
        """
        return list(self.processor.encode(text, out_type=str))

    def all_pieces(self) -> list[str]:
        """Every piece string, in id order (``<pad>``, ``<unk>``, ``<s>``, ``</s>`` first)."""
        return [self.processor.id_to_piece(i) for i in range(len(self))]


class TokenVocab:
    """A fixed list of token strings, one per line of a ``.tokens`` file, ids in file order.

    The first four lines are the special pieces (``<pad>``, ``<unk>``, ``<s>``, ``</s>`` at ids 0-3); a token
    not in the list maps to ``UNK_ID``. Lattice corpora (paper 002) use it for the one source vocabulary over
    the tokens of all segmentations, which no single SentencePiece model holds.

    Args:
        tokens: every token string in id order, the four special ones first.
        path: the file it was loaded from or will be saved to.
    """

    SPECIALS = ("<pad>", "<unk>", "<s>", "</s>")
    SUFFIX = ".tokens"

    def __init__(self, tokens: Sequence[str], path: Path) -> None:
        if tuple(tokens[:4]) != self.SPECIALS:
            raise InputError(f"{path}: the first four tokens must be {', '.join(self.SPECIALS)}")
        self.tokens = list(tokens)
        self.path = Path(path)
        self.ids = {token: index for index, token in enumerate(self.tokens) if index >= len(self.SPECIALS)}

    @classmethod
    def load(cls, path: str | Path) -> TokenVocab:
        """Read a ``.tokens`` file (UTF-8, one token per line).

        Raises:
            InputError: when the file is missing or does not start with the special tokens.
        """
        path = Path(path)
        if not path.is_file():
            raise InputError(f"{path}: no such file (token vocabulary)")
        return cls(path.read_text(encoding="utf-8").split("\n")[:-1], path)

    def save(self) -> None:
        """Write the tokens to ``self.path``, one per line, atomically."""
        with atomic_write(self.path) as handle:
            handle.writelines(token + "\n" for token in self.tokens)

    def __len__(self) -> int:
        """Number of tokens, special ones included."""
        return len(self.tokens)

    def lookup(self, tokens: Sequence[str]) -> list[int]:
        """Ids of token strings; unknown ones get ``UNK_ID``."""
        return [self.ids.get(token, UNK_ID) for token in tokens]

    def encode(self, text: str) -> list[int]:
        """Ids of the whitespace-separated tokens of ``text`` (a lattice corpus encodes through its segmenters)."""
        return self.lookup(text.split())

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        """:meth:`encode` of every text."""
        return [self.encode(text) for text in texts]

    def pieces(self, ids: Sequence[int]) -> list[str]:
        """The token strings of ``ids``."""
        return [self.tokens[int(i)] for i in ids]

    def decode(self, ids: Sequence[int]) -> str:
        """The tokens of ``ids`` joined by spaces, pad/BOS/EOS left out."""
        return " ".join(self.tokens[int(i)] for i in ids if int(i) not in _SPECIAL_IDS)

    def all_pieces(self) -> list[str]:
        """Every token string, in id order."""
        return list(self.tokens)


def load_vocab(path: str | Path) -> Vocab | TokenVocab:
    """A SentencePiece ``.model`` or a :class:`TokenVocab` ``.tokens`` file, by its suffix.

    Raises:
        InputError: as :meth:`Vocab.load` or :meth:`TokenVocab.load`.
    """
    return TokenVocab.load(path) if Path(path).suffix == TokenVocab.SUFFIX else Vocab.load(path)
