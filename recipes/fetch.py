"""Fetch a public corpus release into a recipe's data folder, verify it and write its splits.

A release is described by a YAML file beside the recipe (``recipes/NAME/release.yaml``)::

    files:                      # what the release ships: name -> its public URL and, where known, its sha256
      de-en.tgz: {url: http://.../de-en.tgz, sha256: ""}
    langs: [de, en]
    outputs:                    # the recipe's corpus files, each the concatenation of pieces of the release
      test.{lang}.gz:
        - {file: de-en.tgz, member: de-en/IWSLT14.TED.dev2010.de-en.{lang}.xml, format: seg, lines: 887}

``{lang}`` stands for each of ``langs`` (in every output's name, and in a piece's ``file`` and ``member``);
``member`` may also map each language to its own member, and is the file itself by default. A piece's
``format`` is ``text`` (a sentence per line), ``tags`` (an IWSLT ``train.tags`` file: the talks' metadata
lines dropped), ``seg`` (XML/SGML: the text of each ``<seg>``) or ``fields`` (``a ||| b ||| ...`` lines, as
ASPEC ships them: ``field`` maps each language to its 0-based field); ``every: N`` keeps only its lines whose
number is a multiple of N, ``except_every: N`` the others; ``lines`` is the count the release documents,
checked. A file shipped in parts (the UN corpus's ``NAME.00``, ``NAME.01``) lists their URLs in order as
``parts`` in place of ``url``: each is fetched as its own file (named as its URL ends) and the parts are joined
into ``NAME``. ``segment: {LANG: SEGMENTER}`` writes that language's outputs as the words of an
:mod:`ordo.data.lattice.segmenters` word segmenter joined by spaces (``zh: jieba``, as the project's Zh recipes
segment Chinese). A file shipped inside another archive (IWSLT16's ``en-de.tgz``, one member of the whole
release ``2016-01.tgz`` that WIT3 now publishes) names that archive as ``within`` and its path there as
``member``, in place of ``url``: it is unpacked from the archive into the release folder, and the archive is
fetched only while such a file is missing there (a copy of the inner file put there beforehand is used as it is).

Each file is downloaded (``urllib``: http://, https:// and file:// URLs; ``--mirror BASE`` fetches
``BASE/NAME``, or ``BASE/PART`` for each part, instead: a local mirror or a proxy) to a temporary name and
renamed when complete, so an interrupted fetch leaves no half file and a second run downloads only what is
missing. Its sha256 (a file in parts: the joined file's) is checked where the release states one, and recorded
in ``release/sha256.txt`` either way. Archives (``.tgz``,
``.tar.gz``, ``.zip``, ``.gz``) are unpacked into ``release/extracted/NAME/``, member by member, each written
atomically. A licensed corpus (ASPEC) has no URL: ``--local DIR`` reads its files in place from the copy
the user holds, and a missing one is an error naming it.

usage: python recipes/fetch.py RELEASE.yaml --data-dir DIR [--mirror BASE_URL | --local DIR]
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import re
import shutil
import sys
import tarfile
import urllib.error
import urllib.parse
import urllib.request
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if not __package__:  # run as `python recipes/NAME.py`: the repository root, not recipes/, first on the path
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from ordo.data.textio import atomic_write, iter_lines, read_yaml
from ordo.errors import InputError, OrdoError
from recipes.iwslt17_talks import is_metadata

if TYPE_CHECKING:
    from ordo.data.lattice.segmenters import Segmenter

FORMATS = ("text", "tags", "seg", "fields")
SEG = re.compile(r"<seg[^>]*>(.*)</seg>")  # as sacreBLEU reads its SGML/XML test sets
CHUNK = 1 << 20


class FetchError(OrdoError):
    """A release that cannot be fetched or is not the one described: names the file or URL."""


def load_release(path: Path) -> dict[str, Any]:
    """The release description in ``path``, checked: every piece names a shipped file and a known format."""
    release = read_yaml(path)
    for key in ("files", "langs", "outputs"):
        if key not in release:
            raise FetchError(f"{path}: no '{key}' section")
    files = release["files"]
    for name, spec in files.items():
        if not isinstance(spec, dict) or ("url" not in spec and not spec.get("parts") and not spec.get("within")):
            raise FetchError(f"{path}: files.{name}: needs a url (\"\" for a licensed corpus's file), its parts' urls, "
                             "or the archive it is within")
        within = spec.get("within")
        if within and (not spec.get("member") or not isinstance(files.get(within), dict) or files[within].get("within")):
            raise FetchError(f"{path}: files.{name}: within {within!r} needs a member and another file of files that "
                             "is not within an archive itself")
    check_segment(path, release)
    for output, pieces in release["outputs"].items():
        if "{lang}" not in output:
            raise FetchError(f"{path}: outputs.{output}: the name needs {{lang}} (one file per language)")
        for piece in pieces:
            for lang in release["langs"]:
                if file_of(piece, lang) not in release["files"]:
                    raise FetchError(f"{path}: outputs.{output}: piece names {file_of(piece, lang)!r}, not in files")
            if piece.get("format", "text") not in FORMATS:
                raise FetchError(f"{path}: outputs.{output}: format {piece['format']!r} is not one of {FORMATS}")
    return release


def check_segment(path: Path, release: dict[str, Any]) -> None:
    """Check the release's ``segment`` section: each key one of its ``langs``, each value a word segmenter.

    Raises:
        FetchError: naming the release file and the entry.
    """
    if not release.get("segment"):
        return
    from ordo.data.lattice.segmenters import WORD_SEGMENTERS  # here: it loads PyTorch

    for lang, segmenter in release["segment"].items():
        if lang not in release["langs"] or segmenter not in WORD_SEGMENTERS:
            raise FetchError(f"{path}: segment.{lang}: {segmenter}: needs one of langs ({', '.join(release['langs'])}) "
                             f"and a word segmenter ({', '.join(WORD_SEGMENTERS)})")


def load_words(release: dict[str, Any], folder: Path) -> dict[str, Segmenter]:
    """The word segmenter of each language the release's ``segment`` section names (none: {})."""
    if not release.get("segment"):
        return {}
    from ordo.data.lattice.segmenters import load_segmenter  # here: it loads PyTorch

    return {lang: load_segmenter(spec, folder) for lang, spec in release["segment"].items()}


def source_url(name: str, url: str, mirror: str) -> str:
    """Where file ``name`` comes from: its public ``url``, or ``mirror/name`` when a mirror is given."""
    return f"{mirror.rstrip('/')}/{name}" if mirror else url


def sha256_of(path: Path) -> str:
    """The sha256 of ``path``'s bytes, as hex."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def download(url: str, dest: Path) -> None:
    """Copy ``url`` to ``dest`` through a temporary file beside it, renamed only once the copy is complete.

    Raises:
        FetchError: naming the URL and ``dest`` when the URL is missing or unreachable or the copy breaks off.
    """
    for stale in dest.parent.glob(f".{dest.name}.*.tmp"):  # left by a process killed mid-download
        stale.unlink()
    try:
        with urllib.request.urlopen(url, timeout=60) as response, atomic_write(dest, "wb") as out:
            shutil.copyfileobj(response, out, CHUNK)
    except urllib.error.HTTPError as err:
        raise FetchError(f"{url}: HTTP {err.code} ({err.reason}): cannot download {dest.name}") from None
    except urllib.error.URLError as err:
        raise FetchError(f"{url}: cannot download {dest.name} ({err.reason})") from None
    except OSError as err:
        raise FetchError(f"{url}: download of {dest.name} broke off ({err})") from None


def fetch_file(name: str, spec: dict[str, Any], mirror: str, folder: Path) -> tuple[Path, str]:
    """Download release file ``name`` into ``folder`` unless it is there, and check its sha256 where known.

    Returns:
        the file and its sha256.

    Raises:
        FetchError: naming the file when it cannot be downloaded (a licensed corpus's file has no URL) or its
            sha256 is not the release's (the file is then removed, so that a second run downloads it again).
    """
    dest = folder / name
    if not dest.exists() and spec.get("parts"):
        fetch_parts(dest, spec["parts"], mirror)
    elif not dest.exists():
        url = source_url(name, spec["url"], mirror)
        if not url:
            raise FetchError(f"{name}: a licensed corpus's file, not downloadable: give its folder with --local DIR")
        print(f"fetch: {url} -> {dest}", file=sys.stderr)
        download(url, dest)
    digest = sha256_of(dest)
    expected = spec.get("sha256") or ""
    if expected and digest != expected:
        dest.unlink()
        raise FetchError(f"{dest}: sha256 {digest}, the release's is {expected}: removed, not the release's file "
                         "(a broken download or another version)")
    return dest, digest


def part_name(url: str) -> str:
    """The file name of a part of a file shipped in parts: the last component of its URL's path."""
    return urllib.parse.urlsplit(url).path.rsplit("/", 1)[-1]


def fetch_parts(dest: Path, urls: list[str], mirror: str) -> None:
    """Download each part of the file ``dest`` (``urls`` in order; from the mirror, ``mirror/PART``) beside it,
    unless it is there, then join them into ``dest`` atomically and remove them.

    Raises:
        FetchError: naming the URL and part when one cannot be downloaded (the parts fetched stay for a rerun).
    """
    parts = [dest.parent / part_name(url) for url in urls]
    for url, part in zip(urls, parts):
        if not part.exists():
            url = source_url(part.name, url, mirror)
            print(f"fetch: {url} -> {part}", file=sys.stderr)
            download(url, part)
    with atomic_write(dest, "wb") as out:
        for part in parts:
            with open(part, "rb") as stream:
                shutil.copyfileobj(stream, out, CHUNK)
    for part in parts:
        part.unlink()


def record_sha256(folder: Path, digests: dict[str, str]) -> None:
    """Write ``folder/sha256.txt`` (``sha256sum -c`` format) for the files fetched."""
    with atomic_write(folder / "sha256.txt") as out:
        out.writelines(f"{digest}  {name}\n" for name, digest in sorted(digests.items()))


def archive_kind(path: Path) -> str:
    """``tar``, ``zip``, ``gz`` or ``plain``, from the file name as the release ships it."""
    name = path.name
    if name.endswith((".tgz", ".tar.gz", ".tar")):
        return "tar"
    if name.endswith(".zip"):
        return "zip"
    return "gz" if name.endswith(".gz") else "plain"


def extract(archive: Path, members: set[str], folder: Path, downloaded: bool = True) -> dict[str, Path]:
    """Unpack ``members`` of ``archive`` into ``folder`` (each atomically; those already there are kept).

    Returns:
        member name -> its unpacked file (a plain file: the file itself, whatever the member).

    Raises:
        FetchError: naming the archive when it is corrupt or truncated (a ``downloaded`` one is then removed,
            so that a second run downloads it again) or lacks a member.
    """
    kind = archive_kind(archive)
    if kind == "plain":
        return {member: archive for member in members}
    paths = {member: folder / member for member in members}
    wanted = {member for member, path in paths.items() if not path.exists()}
    try:
        if wanted:
            check_whole(archive, kind)
        if kind == "tar" and wanted:
            with tarfile.open(archive, "r|*") as tar:  # one pass over the stream
                for info in tar:
                    if info.name in wanted and info.isfile():
                        copy_member(tar.extractfile(info), paths[info.name])
                        wanted.discard(info.name)
        elif kind == "zip" and wanted:
            with zipfile.ZipFile(archive) as package:
                for member in sorted(wanted & set(package.namelist())):
                    with package.open(member) as stream:
                        copy_member(stream, paths[member])
                    wanted.discard(member)
        elif kind == "gz" and wanted:
            member = archive.name.removesuffix(".gz")
            if member in wanted:
                with gzip.open(archive, "rb") as stream:
                    copy_member(stream, paths[member])
                wanted.discard(member)
    except (tarfile.TarError, zipfile.BadZipFile, zlib.error, EOFError, gzip.BadGzipFile) as err:
        if not downloaded:
            raise FetchError(f"{archive}: corrupt or truncated archive ({err or type(err).__name__})") from None
        archive.unlink()
        raise FetchError(f"{archive}: corrupt or truncated archive ({err or type(err).__name__}): removed; "
                         "run again to download it again") from None
    if wanted:
        raise FetchError(f"{archive}: has no {', '.join(sorted(wanted))} (is it the release this recipe expects?)")
    return paths


def check_whole(archive: Path, kind: str) -> None:
    """Read ``archive`` to its end, so that a truncated or corrupt one raises (tarfile alone stops quietly at
    a truncation after the first member): gzip's end-of-stream marker and CRC, a zip's CRCs."""
    if kind == "zip":
        with zipfile.ZipFile(archive) as package:
            bad = package.testzip()
        if bad:
            raise zipfile.BadZipFile(f"bad CRC in {bad}")
    elif archive.name.endswith(("gz", ".tgz")):
        with gzip.open(archive, "rb") as stream:
            while stream.read(CHUNK):
                pass


def copy_member(stream: Any, dest: Path) -> None:
    """Write an archive member's ``stream`` to ``dest`` atomically."""
    with atomic_write(dest, "wb") as out:
        shutil.copyfileobj(stream, out, CHUNK)


def archives_wanted(files: dict[str, Any], folder: Path, local: Path | None) -> set[str]:
    """The archives that hold a file ``within`` them that is neither unpacked into ``folder`` yet nor given in
    the user's copy ``local``: only these need fetching (or reading) for it."""
    return {spec["within"] for name, spec in files.items() if spec.get("within")
            and not (folder / name).is_file() and not (local is not None and (local / name).is_file())}


def unpack_within(name: str, spec: dict[str, Any], archive: Path | None, folder: Path, local: Path | None,
                  ) -> tuple[Path, str]:
    """Release file ``name``, shipped as ``spec["member"]`` of the archive ``spec["within"]`` (at ``archive``):
    the user's copy in ``local``, or the one in ``folder``, or else unpacked there from ``archive``; its sha256
    checked where the release states one.

    Returns:
        the file and its sha256.

    Raises:
        FetchError: naming the file when its sha256 is not the release's (a copy in ``folder`` is then removed,
            never the user's), or the archive when it lacks the member or is corrupt.
    """
    path = local / name if local is not None and (local / name).is_file() else folder / name
    if not path.exists():
        assert archive is not None  # archives_wanted named it, so it was fetched
        (unpacked,) = extract(archive, {spec["member"]}, folder / "extracted" / spec["within"], local is None).values()
        unpacked.replace(path)
    digest = sha256_of(path)
    if spec.get("sha256") and digest != spec["sha256"]:
        ours = path.parent == folder
        if ours:
            path.unlink()
        raise FetchError(f"{path}: sha256 {digest}, the release's is {spec['sha256']}{': removed' if ours else ''}, "
                         f"not the release's file (another version of {spec['within']})")
    return path, digest


def local_file(name: str, folder: Path) -> Path:
    """Release file ``name`` in the user's copy ``folder`` of a licensed corpus.

    Raises:
        FetchError: naming the file when it is not there.
    """
    path = folder / name
    if not path.is_file():
        raise FetchError(f"{path}: missing (expected in the corpus folder {folder} as the release ships it)")
    return path


def piece_lines(path: Path, piece: dict[str, Any], lang: str) -> Iterator[str]:
    """The ``lang`` sentences of one piece of an output: ``path``'s lines read as its format, then selected.

    Raises:
        FetchError: naming the file and line when a ``fields`` line has too few fields.
    """
    fmt = piece.get("format", "text")
    every, except_every = piece.get("every", 0), piece.get("except_every", 0)
    number = 0
    for line_number, line in iter_lines(path):
        if fmt == "fields":
            fields = line.split(" ||| ")
            field = piece["field"][lang]
            if len(fields) <= field:
                raise FetchError(f"{path}:{line_number}: {len(fields)} ' ||| '-separated fields, expected at least "
                                 f"{field + 1}")
            line = fields[field].strip()
        elif fmt == "tags":
            if is_metadata(line):
                continue
            line = line.strip()
        elif fmt == "seg":
            match = SEG.search(line)
            if not match:
                continue
            line = match.group(1).strip()
        number += 1
        if (every and number % every) or (except_every and not number % except_every):
            continue
        yield line


def file_of(piece: dict[str, Any], lang: str) -> str:
    """The release file a piece reads for ``lang``."""
    return str(piece.get("file", "")).replace("{lang}", lang)


def member_of(piece: dict[str, Any], lang: str) -> str:
    """The archive member a piece reads for ``lang`` (a plain file's: the file itself)."""
    member = piece.get("member", file_of(piece, lang))
    return member[lang] if isinstance(member, dict) else member.replace("{lang}", lang)


def write_output(dest: Path, pieces: list[tuple[Path, dict[str, Any]]], label: dict[Path, str], lang: str,
                 words: Segmenter | None = None) -> int:
    """Write the pieces' sentences to ``dest`` (gzip, atomically), each as ``words``' words joined by spaces when
    given, checking each piece's documented count.

    Returns:
        the number of lines written.

    Raises:
        FetchError: naming the archive and member whose count differs from the release's (``dest`` is then
            not written).
    """
    total = 0
    with atomic_write(dest, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as out:
        for path, piece in pieces:
            count = 0
            for line in piece_lines(path, piece, lang):
                out.write(f"{' '.join(words.segment_one(line)) if words else line}\n".encode())
                count += 1
            expected = piece.get("lines")
            if expected is not None and count != expected:
                raise FetchError(f"{label[path]}: {count} lines, the release has {expected}: not the release this "
                                 "recipe expects (truncated, or another version)")
            total += count
    return total


def fetch_release(release_path: Path, data_dir: Path, mirror: str = "", local: Path | None = None) -> list[Path]:
    """Fetch, verify and unpack the release ``release_path`` describes into ``data_dir/release/`` (or, with
    ``local``, read its files from that folder), then write its outputs (e.g. ``train.de.gz``) into
    ``data_dir``; outputs already there are kept.

    Returns:
        the output files.
    """
    release = load_release(release_path)
    folder = data_dir / "release"
    folder.mkdir(parents=True, exist_ok=True)
    outputs = {name.replace("{lang}", lang): pieces for name, pieces in release["outputs"].items()
               for lang in release["langs"]}
    langs = {name.replace("{lang}", lang): lang for name in release["outputs"] for lang in release["langs"]}
    missing = [name for name in outputs if not (data_dir / name).exists()]
    if not missing:
        return [data_dir / name for name in outputs]
    files = release["files"]
    wanted = archives_wanted(files, folder, local)
    outer = {spec["within"] for spec in files.values() if spec.get("within")}
    direct = [name for name, spec in files.items() if not spec.get("within")
              and (name not in outer or name in wanted or (local is None and (folder / name).exists()))]
    if local is not None:
        archives = {name: local_file(name, local) for name in direct}
        digests: dict[str, str] = {}
    else:
        fetched = {name: fetch_file(name, files[name], mirror, folder) for name in direct}
        archives = {name: path for name, (path, _) in fetched.items()}
        digests = {name: digest for name, (_, digest) in fetched.items()}
    for name, spec in files.items():
        if spec.get("within"):
            archives[name], digests[name] = unpack_within(name, spec, archives.get(spec["within"]), folder, local)
    if local is None:
        record_sha256(folder, digests)
    members: dict[str, set[str]] = {name: set() for name in archives}
    for name in missing:
        for piece in outputs[name]:
            members[file_of(piece, langs[name])].add(member_of(piece, langs[name]))
    unpacked = {name: extract(archives[name], members[name], folder / "extracted" / name, local is None)
                for name in archives if members[name]}
    segmenters = load_words(release, folder)
    for name in missing:
        pieces, label = [], {}
        for piece in outputs[name]:
            file, member = file_of(piece, langs[name]), member_of(piece, langs[name])
            path = unpacked[file][member]
            pieces.append((path, piece))
            label[path] = str(path) if path == archives[file] else f"{archives[file]}: {member}"
        count = write_output(data_dir / name, pieces, label, langs[name], segmenters.get(langs[name]))
        print(f"fetch: {data_dir / name}: {count} lines", file=sys.stderr)
    return [data_dir / name for name in outputs]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("release", type=Path, help="the recipe's release.yaml")
    parser.add_argument("--data-dir", type=Path, required=True, help="where the corpus files go")
    parser.add_argument("--mirror", default="", help="fetch NAME from MIRROR/NAME instead of the public URL")
    parser.add_argument("--local", type=Path, help="read the release's files in place from this folder")
    args = parser.parse_args()
    try:
        fetch_release(args.release, args.data_dir, args.mirror, args.local)
    except (OrdoError, InputError, OSError) as err:
        sys.exit(f"fetch: error: {err}")


if __name__ == "__main__":
    main()
