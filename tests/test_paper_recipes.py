"""The papers' public-corpus recipes (recipes/*/release.yaml) against local mirrors built here in each release's
layout and compression: download (over HTTP on loopback or file://), verification, the splits, and the whole
recipe (prepare, a few updates of a tiny model, translation, scoring); and the errors a broken mirror gives."""

import functools
import gzip
import io
import os
import subprocess
import sys
import tarfile
import threading
import zipfile
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from ordo.config import from_dict
from ordo.data.prepare import PrepareConfig, prepare
from ordo.data.textio import read_lines, read_yaml

RECIPES = Path(__file__).resolve().parents[1] / "recipes"
sys.path.insert(0, str(RECIPES.parent))  # the repository root: the recipes package
from recipes import fetch  # the shared downloader
from recipes.nist_zhen import corpus as nist_corpus

RELEASES = {p.parent.name: read_yaml(p) for p in sorted(RECIPES.glob("*/release.yaml"))}
PAPER_RECIPES = [name for name, spec in RELEASES.items()  # a file within another archive comes with that archive
                 if all(f.get("url") or f.get("parts") or f.get("within") for f in spec["files"].values())]
LICENSED = [name for name in RELEASES if name not in PAPER_RECIPES]  # read in place from the user's copy
TINY = ["model.preset=tiny", "model.d_model=32", "model.ffn_dim=64", "train.max_tokens=300", "train.max_steps=4",
        "train.valid_every=2", "train.warmup_steps=2", "train.valid_bleu=false", "train.progress=false",
        "train.threads=1", "train.device=cpu", "decode.max_len_a=0", "decode.max_len_b=8"]
WORDS = {"de": "der die das haus katze hund", "en": "the a house cat dog tree", "ja": "猫 犬 家 木 の が",
         "zh": "猫 狗 房子 树 的 了"}


def sentence(lang: str, number: int) -> str:
    """A short made-up sentence of ``lang``, different for each ``number``."""
    words = (WORDS.get(lang) or WORDS["en"]).split()
    return " ".join(words[(number + k) % len(words)] for k in range(2 + number % 4)) + f" {number}"


def shipped(lang: str, number: int) -> str:
    """:func:`sentence` as a release ships it: Chinese unsegmented, as it is written."""
    return sentence(lang, number).replace(" ", "") if lang == "zh" else sentence(lang, number)


def member_text(fmt: str, lang: str, lines: int) -> str:
    """A release member of ``lines`` sentences in the layout of its format."""
    if fmt == "tags":  # an IWSLT train.tags file: each talk's metadata lines, then its transcript
        half = lines // 2
        talk = [f"<url>http://www.ted.com/talks/{t}</url>\n<talkid>{t}</talkid>\n<title>Talk {t}</title>\n"
                for t in (1, 2)]
        body = [f" {shipped(lang, i)} \n" for i in range(lines)]
        return talk[0] + "".join(body[:half]) + talk[1] + "".join(body[half:])
    if fmt == "seg":
        segs = "".join(f'<seg id="{i + 1}"> {shipped(lang, 1000 + i)} </seg>\n' for i in range(lines))
        return f'<refset setid="test" srclang="any">\n<doc docid="1" genre="news">\n{segs}</doc>\n</refset>\n'
    return "".join(f"{shipped(lang, i)}\n" for i in range(lines))


def pack(path: Path, members: dict[str, bytes]) -> None:
    """Write ``members`` into ``path`` compressed as its name says (tgz, tar.gz, zip, gz or plain)."""
    kind = fetch.archive_kind(path)
    if kind == "tar":
        with tarfile.open(path, "w:gz") as tar:
            for name, data in members.items():
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    elif kind == "zip":
        with zipfile.ZipFile(path, "w") as package:
            for name, data in members.items():
                package.writestr(name, data)
    else:
        (data,) = members.values()
        path.write_bytes(gzip.compress(data) if kind == "gz" else data)


def split_into_parts(path: Path, urls: list[str]) -> None:
    """Cut ``path`` into ``len(urls)`` parts beside it, each named as its URL ends (as the UN corpus ships its
    archives: ``NAME.00``, ``NAME.01``), in place of the whole file; nothing without ``urls``."""
    if not urls:
        return
    data, size = path.read_bytes(), -(-path.stat().st_size // len(urls))
    for number, url in enumerate(urls):
        (path.parent / fetch.part_name(url)).write_bytes(data[number * size:(number + 1) * size])
    path.unlink()


def build_mirror(recipe: str, root: Path, lines: int = 6) -> tuple[Path, Path]:
    """A mirror folder of ``recipe``'s release in its layout and compression, with ``lines`` sentences per
    member (46 for IWSLT's train.tags, so that every 23rd line makes a dev set of 2), and the release's
    description with the counts and sha256 the mirror has. A file ``within`` another archive is packed, then
    put into that archive as its member (beside another language pair's, as IWSLT16's 2016-01.tgz holds every
    pair's) in place of the mirror's own copy.

    Returns:
        (mirror folder, release.yaml for the mirror).
    """
    release = read_yaml(RECIPES / recipe / "release.yaml")
    mirror = root / "mirror"
    mirror.mkdir(parents=True)
    members: dict[str, dict[str, bytes]] = {name: {} for name in release["files"]}
    for pieces in release["outputs"].values():
        for piece in pieces:
            count = 46 if piece.get("format") == "tags" else lines
            for lang in release["langs"]:
                text = member_text(piece.get("format", "text"), lang, count)
                members[fetch.file_of(piece, lang)][fetch.member_of(piece, lang)] = text.encode()
            if "lines" in piece:
                piece["lines"] = count
    for name, spec in release["files"].items():
        if spec.get("within"):
            pack(mirror / name, members.pop(name))
            outer = members[spec["within"]]
            outer[spec["member"]] = (mirror / name).read_bytes()
            outer[spec["member"].replace(name, f"other-{name}")] = outer[spec["member"]]  # another pair's archive
            (mirror / name).unlink()
    for name, files in members.items():
        pack(mirror / name, files)
        if release["files"][name].get("sha256"):  # a stated digest: the miniature's, so that it is checked
            release["files"][name]["sha256"] = fetch.sha256_of(mirror / name)
        split_into_parts(mirror / name, release["files"][name].get("parts", []))
    tiny_release = root / "release.yaml"
    tiny_release.write_text(yaml.safe_dump(release, allow_unicode=True), encoding="utf-8")
    return mirror, tiny_release


@pytest.fixture
def http_mirror() -> Iterator:
    """Serve a folder over HTTP on 127.0.0.1 (a free port): call with the folder, get its base URL."""
    servers = []

    def serve(folder: Path) -> str:
        server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(folder)))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield serve
    for server in servers:
        server.shutdown()
        server.server_close()


class QuietHandler(SimpleHTTPRequestHandler):
    """http.server's file handler without its request log on stderr."""

    def log_message(self, format: str, *args: object) -> None:
        pass


def run_recipe(recipe: str, *args: str) -> subprocess.CompletedProcess:
    """``recipes/RECIPE/run.sh ARGS``, its output captured."""
    return subprocess.run(["bash", str(RECIPES / recipe / "run.sh"), *args], capture_output=True, text=True,
                          check=False)


def recipe_args(tmp_path: Path, mirror: str, release: Path) -> list[str]:
    """The flags of a tiny end-to-end run of a recipe against ``mirror``."""
    sets = [word for key in TINY for word in ("--set", key)]
    return ["--data-dir", str(tmp_path / "data"), "--work", str(tmp_path / "work"), "--download",
            "--mirror", mirror, "--release", str(release), *sets]


def test_every_paper_recipe_fetches_with_its_own_script():
    assert {"iwslt14_deen", "iwslt16_ende", "wmt14_ende", "wmt17_zhen", "kftt_jaen"} <= set(PAPER_RECIPES)
    assert LICENSED == ["aspec_jaen"]
    for recipe in RELEASES:
        script = (RECIPES / recipe / "run.sh").read_text()
        assert "recipe_main" in script or "recipe_run" in script, recipe  # lib.sh's steps
        # a public release is fetched by lib.sh's fetch_release; a licensed one reads the user's copy in place
        assert ("download_data()" in script) == ("--local" in script) == (recipe in LICENSED), recipe
        release = fetch.load_release(RECIPES / recipe / "release.yaml")
        assert all(url.startswith(("http://", "https://")) or recipe in LICENSED
                   for spec in release["files"].values() if not spec.get("within")
                   for url in spec.get("parts") or [spec["url"]])
        assert any("lines" in piece for pieces in release["outputs"].values() for piece in pieces), recipe


@pytest.mark.parametrize("recipe", PAPER_RECIPES)
def test_a_release_is_fetched_verified_and_split_from_its_mirror(recipe, tmp_path):
    mirror, release = build_mirror(recipe, tmp_path)
    outputs = fetch.fetch_release(release, tmp_path / "data", mirror.as_uri())
    spec = read_yaml(release)
    assert {"train.{lang}.gz", "valid.{lang}.gz", "test.{lang}.gz"} <= set(spec["outputs"])
    assert sorted(p.name for p in outputs) == sorted(name.replace("{lang}", lang) for name in spec["outputs"]
                                                     for lang in spec["langs"])
    for name, pieces in spec["outputs"].items():
        counts = {lang: len(read_lines(tmp_path / "data" / name.replace("{lang}", lang))) for lang in spec["langs"]}
        assert len(set(counts.values())) == 1 and min(counts.values()) > 0, (name, counts)
        if all("lines" in piece for piece in pieces):
            assert min(counts.values()) == sum(piece["lines"] for piece in pieces), name
    first = spec["outputs"]["test.{lang}.gz"][0]
    number = 1000 if first.get("format") == "seg" else 0
    for lang in spec["langs"]:  # a language segmented into words (release.yaml's segment): its text, spaces apart
        line = read_lines(tmp_path / "data" / f"test.{lang}.gz")[0]
        assert (line.replace(" ", "") if lang in spec.get("segment", {}) else line) == shipped(lang, number), lang


def test_the_wmt17_release_joins_the_un_corpus_parts_and_segments_the_chinese(tmp_path):
    mirror, release = build_mirror("wmt17_zhen", tmp_path)
    assert {"UNv1.0.en-zh.tar.gz.00", "UNv1.0.en-zh.tar.gz.01"} <= {path.name for path in mirror.iterdir()}
    fetch.fetch_release(release, tmp_path / "data", mirror.as_uri())
    folder = tmp_path / "data" / "release"
    assert sorted(path.name for path in folder.iterdir() if path.is_file()) == [  # the parts joined, then removed
        "UNv1.0.en-zh.tar.gz", "dev.tgz", "sha256.txt", "test.tgz", "training-parallel-nc-v12.tgz"]
    assert "  UNv1.0.en-zh.tar.gz\n" in (folder / "sha256.txt").read_text()
    raw = [shipped("zh", i) for i in range(6)] * 2  # News Commentary's 6 lines, then the UN corpus's
    words = read_lines(tmp_path / "data" / "train.zh.gz")
    assert [line.replace(" ", "") for line in words] == raw and sum(line.count(" ") for line in words) > len(raw)
    assert read_lines(tmp_path / "data" / "train.en.gz") == [sentence("en", i) for i in range(6)] * 2
    spec = read_yaml(release)
    spec["segment"] = {"de": "jieba"}
    release.write_text(yaml.safe_dump(spec, allow_unicode=True), encoding="utf-8")
    with pytest.raises(fetch.FetchError, match=r"release\.yaml: segment\.de: jieba: needs one of langs \(zh, en\)"):
        fetch.load_release(release)


SLOW = pytest.mark.skipif(not os.environ.get("ORDO_SLOW_TESTS"),
                          reason="slow (about 40 s on 2 busy cores): ORDO_SLOW_TESTS=1 runs it")


@pytest.mark.parametrize("recipe", [pytest.param(r, marks=() if r == "iwslt14_deen" else SLOW)
                                    for r in PAPER_RECIPES])
def test_a_recipe_runs_end_to_end_against_its_mirror(recipe, tmp_path, http_mirror):
    """Every recipe shares lib.sh's steps: IWSLT14's (over HTTP) runs in every test run, the others (file://)
    with ORDO_SLOW_TESTS=1."""
    mirror, release = build_mirror(recipe, tmp_path)
    url = http_mirror(mirror) if recipe == "iwslt14_deen" else mirror.as_uri()
    done = run_recipe(recipe, *recipe_args(tmp_path, url, release))
    assert done.returncode == 0, done.stderr[-3000:]
    spec = read_yaml(release)
    src, tgt = spec["langs"]  # each release lists its languages as source, target
    test_src = read_lines(tmp_path / "data" / f"test.{src}.gz")
    test_ref = read_lines(tmp_path / "data" / f"test.{tgt}.gz")
    pieces = spec["outputs"]["test.{lang}.gz"]
    assert len(test_src) == len(test_ref) == sum(piece["lines"] for piece in pieces)
    assert "<seg" not in test_ref[0] and test_ref[0] == sentence(tgt, 1000 if pieces[0].get("format") == "seg" else 0)
    out = tmp_path / "work" / ("paper" if (RECIPES / recipe / "budgets.yaml").exists() else "")  # the default budget's
    assert "BLEU" in done.stdout and (out / "test.averaged.hyp").exists()
    assert len(read_lines(out / "test.averaged.hyp")) == len(test_src)
    assert (tmp_path / "data" / "release" / "sha256.txt").exists()


def test_the_iwslt14_splits_are_fairseqs(tmp_path):
    mirror, release = build_mirror("iwslt14_deen", tmp_path)
    fetch.fetch_release(release, tmp_path / "data", mirror.as_uri())
    train, valid = (read_lines(tmp_path / "data" / f"{split}.en.gz") for split in ("train", "valid"))
    transcript = [sentence("en", i) for i in range(46)]  # the metadata lines dropped, each line stripped
    assert valid == transcript[22::23] and train == [s for i, s in enumerate(transcript, 1) if i % 23]
    test = read_lines(tmp_path / "data" / "test.de.gz")
    assert len(test) == 5 * 6 and test[:2] == [sentence("de", 1000), sentence("de", 1001)]


def test_the_iwslt16_pair_is_unpacked_from_the_whole_release_and_split_as_paper_002_did(tmp_path):
    mirror, release = build_mirror("iwslt16_ende", tmp_path)
    assert [path.name for path in mirror.iterdir()] == ["2016-01.tgz"]  # en-de.tgz is one member of it
    data, folder = tmp_path / "data", tmp_path / "data" / "release"
    fetch.fetch_release(release, data, mirror.as_uri())
    assert sorted(path.name for path in folder.iterdir() if path.is_file()) == ["2016-01.tgz", "en-de.tgz",
                                                                                 "sha256.txt"]
    recorded = (folder / "sha256.txt").read_text()
    assert f"{fetch.sha256_of(folder / 'en-de.tgz')}  en-de.tgz\n" in recorded and "  2016-01.tgz\n" in recorded
    transcript = [sentence("en", i) for i in range(46)]  # every transcript line, the talks' metadata dropped
    assert read_lines(data / "train.en.gz") == transcript and len(read_lines(data / "train.de.gz")) == 46
    for split in ("valid", "test", "tst2013"):  # tst2012, tst2014, tst2013: each its release count (here 6)
        assert read_lines(data / f"{split}.de.gz") == [sentence("de", 1000 + i) for i in range(6)], split
    (folder / "2016-01.tgz").unlink()  # a rerun unpacks from en-de.tgz: the whole release is not fetched again
    (data / "test.de.gz").unlink()
    fetch.fetch_release(release, data, "http://127.0.0.1:9")
    assert len(read_lines(data / "test.de.gz")) == 6 and not (folder / "2016-01.tgz").exists()
    fetch.fetch_release(release, tmp_path / "copy", local=folder)  # a folder that holds en-de.tgz: read in place
    assert read_lines(tmp_path / "copy" / "test.de.gz") == read_lines(data / "test.de.gz")
    spec = read_yaml(release)
    spec["files"]["en-de.tgz"]["sha256"] = "0" * 64
    release.write_text(yaml.safe_dump(spec), encoding="utf-8")
    with pytest.raises(fetch.FetchError, match=r"en-de\.tgz: sha256 [0-9a-f]{64}, the release's is 0{64}, not"):
        fetch.fetch_release(release, tmp_path / "other", local=folder)
    assert (folder / "en-de.tgz").exists()  # the user's copy is never removed
    (data / "test.de.gz").unlink()
    with pytest.raises(fetch.FetchError, match=r"en-de\.tgz: sha256 [0-9a-f]{64}, the release's is 0{64}: removed"):
        fetch.fetch_release(release, data, mirror.as_uri())
    with pytest.raises(fetch.FetchError, match=r"2016-01\.tgz: sha256 [0-9a-f]{64}, the release's is 425a3688e0fa"):
        fetch.fetch_release(RECIPES / "iwslt16_ende" / "release.yaml", data, mirror.as_uri())  # the real digest
    assert not (folder / "2016-01.tgz").exists()  # the miniature is not the release's 2016-01.tgz: removed


SHARED_IWSLT = RECIPES.parents[1] / "shared" / "data" / "iwslt-de-en"


@pytest.mark.skipif(not SHARED_IWSLT.is_dir(), reason="../shared/data/iwslt-de-en not present")
def test_the_iwslt16_counts_are_those_of_the_same_releases_de_en_sets():
    """The en-de test sets' counts the release checks, against the de-en sets of the same 2016-01 release."""
    outputs = read_yaml(RECIPES / "iwslt16_ende" / "release.yaml")["outputs"]
    for output, name in (("valid.{lang}.gz", "tst2012"), ("test.{lang}.gz", "tst2014"), ("tst2013.{lang}.gz", "tst2013")):
        (piece,) = outputs[output]
        assert f"IWSLT16.TED.{name}.en-de" in piece["member"]
        assert piece["lines"] == len(read_lines(SHARED_IWSLT / f"{name}.en.gz")), name


def test_the_iwslt16_training_pairs_over_50_words_are_dropped_the_same_for_every_system(tmp_path):
    """Paper 002: "sentence pairs with either side longer than 50 were dropped", in training; the recipe's and
    every verdict system's prepare config count words (one set of pairs for all), and the dev set keeps its own."""
    systems = read_yaml(RECIPES / "iwslt16_verdict" / "systems.yaml")
    configs = [RECIPES / "iwslt16_ende" / "prepare.yaml",
               *sorted({RECIPES / "iwslt16_verdict" / entry["prepare"] for entry in systems.values()})]
    assert len(configs) == 1 + 4  # the 1-best systems' three, the lattice's
    for path in configs:
        spec = read_yaml(path)
        assert (spec["max_words"], spec["max_len"], spec["max_len_ratio"]) == (50, 0, 0), path
        assert (spec["tgt_lang"], spec["vocab_size"], spec["model_type"]) == ("de", 16000, "bpe"), path  # 16K target
    mirror, release = build_mirror("iwslt16_ende", tmp_path)
    data = tmp_path / "data"
    fetch.fetch_release(release, data, mirror.as_uri())
    words = {n: " ".join(f"w{k}" for k in range(n)) for n in (50, 51)}
    extra = {"en": [words[51], words[50], "a house"], "de": ["ein Haus", words[50], words[51]]}  # 51 on either side
    for split, lines in (("train", extra), ("valid", {"en": [words[51]], "de": ["ein Haus"]})):
        for lang, added in lines.items():
            path = data / f"{split}.{lang}.gz"
            path.write_bytes(gzip.compress("".join(f"{line}\n" for line in read_lines(path) + added).encode()))
    files = {f"{split}_{side}": str(data / f"{name}.{lang}.gz") for split, name in (("train", "train"), ("valid", "valid"))
             for side, lang in (("src", "en"), ("tgt", "de"))}
    for path in configs:
        meta = prepare(from_dict(PrepareConfig, {**read_yaml(path), **files, "out": str(tmp_path / path.stem)},
                                 str(path)), progress=False)
        assert meta.splits == {"train": 46 + 1, "valid": 6 + 1}, path  # the 50-word pair kept, the 51s dropped
        assert read_lines(tmp_path / path.stem / "train.src.txt")[-1] == words[50]


def test_the_release_line_counts_are_checked_and_the_file_named(tmp_path):
    mirror, _ = build_mirror("iwslt14_deen", tmp_path)
    with pytest.raises(fetch.FetchError, match=r"de-en\.tgz: de-en/IWSLT14\.TED\.dev2010\.de-en\.de\.xml: 6 lines, "
                                               r"the release has 887"):
        fetch.fetch_release(RECIPES / "iwslt14_deen" / "release.yaml", tmp_path / "data", mirror.as_uri())
    assert not (tmp_path / "data" / "test.de.gz").exists()


def test_a_file_missing_from_the_mirror_is_named(tmp_path, http_mirror):
    mirror, release = build_mirror("kftt_jaen", tmp_path)
    (archive,) = mirror.iterdir()
    archive.unlink()
    done = run_recipe("kftt_jaen", *recipe_args(tmp_path, http_mirror(mirror), release))
    assert done.returncode != 0 and "HTTP 404" in done.stderr and f"cannot download {archive.name}" in done.stderr
    assert not list((tmp_path / "data" / "release").iterdir())  # no half file


def test_a_member_missing_from_an_archive_is_named(tmp_path):
    mirror, release = build_mirror("wmt14_ende", tmp_path)
    pack(mirror / "dev.tgz", {"dev/newstest2013.en": b"a\n"})  # newstest2013.de left out
    with pytest.raises(fetch.FetchError, match=r"dev\.tgz: has no dev/newstest2013\.de"):
        fetch.fetch_release(release, tmp_path / "data", mirror.as_uri())


def test_a_corrupt_archive_is_named_removed_and_fetched_again(tmp_path):
    mirror, release = build_mirror("iwslt14_deen", tmp_path)
    good = (mirror / "de-en.tgz").read_bytes()
    (mirror / "de-en.tgz").write_bytes(good[: len(good) // 2])  # truncated
    with pytest.raises(fetch.FetchError, match=r"de-en\.tgz: corrupt or truncated archive"):
        fetch.fetch_release(release, tmp_path / "data", mirror.as_uri())
    assert not (tmp_path / "data" / "release" / "de-en.tgz").exists()
    (mirror / "de-en.tgz").write_bytes(good)
    assert len(fetch.fetch_release(release, tmp_path / "data", mirror.as_uri())) == 6


def test_a_stated_sha256_is_checked(tmp_path):
    mirror, release = build_mirror("iwslt14_deen", tmp_path)
    spec = read_yaml(release)
    spec["files"]["de-en.tgz"]["sha256"] = "0" * 64
    release.write_text(yaml.safe_dump(spec), encoding="utf-8")
    with pytest.raises(fetch.FetchError, match=r"de-en\.tgz: sha256 [0-9a-f]{64}, the release's is 0{64}"):
        fetch.fetch_release(release, tmp_path / "data", mirror.as_uri())
    spec["files"]["de-en.tgz"]["sha256"] = fetch.sha256_of(mirror / "de-en.tgz")
    release.write_text(yaml.safe_dump(spec), encoding="utf-8")
    fetch.fetch_release(release, tmp_path / "data", mirror.as_uri())
    recorded = (tmp_path / "data" / "release" / "sha256.txt").read_text()
    assert recorded == f"{spec['files']['de-en.tgz']['sha256']}  de-en.tgz\n"


def test_an_interrupted_download_leaves_no_half_file_and_resumes(tmp_path, monkeypatch):
    mirror, release = build_mirror("iwslt14_deen", tmp_path)
    folder = tmp_path / "data" / "release"

    class BrokenStream(io.BytesIO):
        def read(self, size: int = -1) -> bytes:
            raise ConnectionResetError("connection reset")

    real_urlopen = fetch.urllib.request.urlopen
    monkeypatch.setattr(fetch.urllib.request, "urlopen", lambda url, timeout: BrokenStream())
    with pytest.raises(fetch.FetchError, match=r"de-en\.tgz broke off"):
        fetch.fetch_release(release, tmp_path / "data", mirror.as_uri())
    assert list(folder.iterdir()) == []
    (folder / ".de-en.tgz.abc.tmp").write_bytes(b"half")  # as a killed process leaves it
    monkeypatch.setattr(fetch.urllib.request, "urlopen", real_urlopen)
    fetch.fetch_release(release, tmp_path / "data", mirror.as_uri())
    assert sorted(p.name for p in folder.iterdir()) == ["de-en.tgz", "extracted", "sha256.txt"]



def aspec_folder(root: Path, lines: int = 6) -> Path:
    """A copy of ASPEC-JE's layout: ``score ||| id ||| n ||| ja ||| en`` training lines (train-1 sentences 0 to
    ``lines`` - 1, train-2 the next ``lines``), ``id ||| n ||| ja ||| en`` dev and test lines (0 to ``lines`` - 1)."""
    for name, first in (("train/train-1.txt", 0), ("train/train-2.txt", lines), ("dev/dev.txt", 0),
                        ("test/test.txt", 0)):
        path = root / "ASPEC-JE" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        score = "0.9 ||| " if name.startswith("train") else ""
        path.write_text("".join(f"{score}A-{i} ||| {i} ||| {sentence('ja', i)} ||| {sentence('en', i)}\n"
                                for i in range(first, first + lines)), encoding="utf-8")
    return root / "ASPEC-JE"


def tiny_release(recipe: str, root: Path, lines: int) -> Path:
    """``recipe``'s release.yaml with every documented count set to ``lines``."""
    spec = read_yaml(RECIPES / recipe / "release.yaml")
    for pieces in spec["outputs"].values():
        for piece in pieces:
            piece["lines"] = lines
    path = root / "release.yaml"
    path.write_text(yaml.safe_dump(spec, allow_unicode=True), encoding="utf-8")
    return path


def test_a_licensed_corpus_is_split_in_place_from_its_fields(tmp_path):
    aspec = aspec_folder(tmp_path)
    fetch.fetch_release(tiny_release("aspec_jaen", tmp_path, 6), tmp_path / "corpus", local=aspec)
    for split, count in (("train", 12), ("valid", 6), ("test", 6)):  # train: train-1, then train-2 (the papers' 2M)
        assert read_lines(tmp_path / "corpus" / f"{split}.ja.gz") == [sentence("ja", i) for i in range(count)]
        assert read_lines(tmp_path / "corpus" / f"{split}.en.gz") == [sentence("en", i) for i in range(count)]
    assert not (tmp_path / "corpus" / "release" / "sha256.txt").exists()  # nothing downloaded
    with pytest.raises(fetch.FetchError, match=r"train-1\.txt: 6 lines, the release has 1000000"):
        fetch.fetch_release(RECIPES / "aspec_jaen" / "release.yaml", tmp_path / "other", local=aspec)
    train_2 = aspec / "train" / "train-2.txt"
    train_2.write_text("".join(train_2.read_text(encoding="utf-8").splitlines(keepends=True)[:5]), encoding="utf-8")
    with pytest.raises(fetch.FetchError, match=r"train/train-2\.txt: 5 lines, the release has 6"):  # each file's count
        fetch.fetch_release(tiny_release("aspec_jaen", tmp_path, 6), tmp_path / "short", local=aspec)
    aspec = aspec_folder(tmp_path)
    dev = aspec / "dev" / "dev.txt"
    dev.write_text("A-1 ||| 1\n" + dev.read_text(encoding="utf-8"), encoding="utf-8")  # no sentence fields
    with pytest.raises(fetch.FetchError, match=r"dev\.txt:1: 2 ' \|\|\| '-separated fields, expected at least 3"):
        fetch.fetch_release(tiny_release("aspec_jaen", tmp_path, 6), tmp_path / "third", local=aspec)


def test_a_licensed_corpus_recipe_names_the_missing_file_or_flag(tmp_path):
    aspec = aspec_folder(tmp_path)
    for name in ("train/train-2.txt", "test/test.txt"):  # a copy of train-1 alone lacks the papers' second 1M pairs
        (aspec / name).unlink()
        done = run_recipe("aspec_jaen", "--data-dir", str(aspec), "--work", str(tmp_path / "work"))
        assert done.returncode == 1 and f"{aspec}/{name}: missing (expected in the corpus folder" in done.stderr
        aspec = aspec_folder(tmp_path)
    done = run_recipe("aspec_jaen")
    assert done.returncode == 2 and "licensed" in done.stderr and "--data-dir" in done.stderr


def test_a_licensed_corpus_recipe_checks_its_flags_before_it_writes_the_corpus(tmp_path):
    """Before, the splits were written (NIST's Chinese segmented by jieba: minutes on the real corpus) and only
    then did an unknown flag or budget, or --download (which a licensed corpus refuses), stop the recipe."""
    aspec = aspec_folder(tmp_path)
    nist_folder(tmp_path)
    for recipe, copy in (("aspec_jaen", aspec), ("nist_zhen", tmp_path / "NIST")):
        for flags, message in ((["--budget", "shrot"], "no budget 'shrot'"),
                               (["--bogus", "1"], "unknown option --bogus"), (["--download"], "cannot be downloaded")):
            done = run_recipe(recipe, "--data-dir", str(copy), "--work", str(tmp_path / "work"), *flags)
            assert done.returncode == 2 and message in done.stderr, done.stderr[-3000:]
            assert not (tmp_path / "work" / "corpus").exists()


@SLOW
def test_the_licensed_aspec_recipe_runs_end_to_end_from_its_folder(tmp_path):
    aspec = aspec_folder(tmp_path)
    sets = [word for key in TINY for word in ("--set", key)]
    done = run_recipe("aspec_jaen", "--data-dir", str(aspec), "--work", str(tmp_path / "work"), "--release",
                      str(tiny_release("aspec_jaen", tmp_path, 6)), *sets)
    assert done.returncode == 0, done.stderr[-3000:]
    corpus = tmp_path / "work" / "corpus"
    assert read_lines(corpus / "train.en.gz") == [sentence("en", i) for i in range(12)]  # train-1, then train-2
    assert "train.ja.gz: 12 lines" in done.stderr
    out = tmp_path / "work" / "paper"  # the default budget's
    assert "BLEU" in done.stdout and len(read_lines(out / "test.averaged.hyp")) == 6


def test_zip_and_gz_releases_are_unpacked(tmp_path):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    pack(mirror / "corpus.zip", {f"corpus/train.{lang}": member_text("text", lang, 5).encode() for lang in ("de", "en")})
    for lang in ("de", "en"):
        pack(mirror / f"test.{lang}.gz", {f"test.{lang}": member_text("text", lang, 3).encode()})
    spec = {"files": {name: {"url": f"http://example.org/{name}", "sha256": ""}
                      for name in ("corpus.zip", "test.de.gz", "test.en.gz")},
            "langs": ["de", "en"],
            "outputs": {"train.{lang}.gz": [{"file": "corpus.zip", "member": "corpus/train.{lang}", "lines": 5}],
                        "test.{lang}.gz": [{"file": "test.{lang}.gz", "member": "test.{lang}", "lines": 3}]}}
    release = tmp_path / "release.yaml"
    release.write_text(yaml.safe_dump(spec), encoding="utf-8")
    fetch.fetch_release(release, tmp_path / "data", mirror.as_uri())
    assert read_lines(tmp_path / "data" / "train.en.gz") == [sentence("en", i) for i in range(5)]
    assert read_lines(tmp_path / "data" / "test.de.gz") == [sentence("de", i) for i in range(3)]
    (tmp_path / "data" / "test.de.gz").unlink()  # written again from the unpacked member, nothing fetched
    fetch.fetch_release(release, tmp_path / "data", "http://127.0.0.1:9")
    assert read_lines(tmp_path / "data" / "test.de.gz") == [sentence("de", i) for i in range(3)]


NIST_REFS = 4


def nist_folder(root: Path, lines: int = 8, train: int = 40, sets: tuple[str, ...] = ("nist02", "nist03", "nist05"),
                ) -> tuple[Path, Path]:
    """A copy of the NIST Zh->En layout (unsegmented Chinese; four different references per set) and a sets file
    with its counts.

    Returns:
        (the copy's folder, the sets file).
    """
    folder = root / "NIST"
    folder.mkdir()

    def write(name: str, texts: list[str]) -> None:
        (folder / name).write_text("".join(f"{text}\n" for text in texts), encoding="utf-8")

    write("train.zh", [sentence("zh", i).replace(" ", "") for i in range(train)])
    write("train.en", [sentence("en", i) for i in range(train)])
    for number, name in enumerate(sets):
        first = 1000 + 100 * number
        write(f"{name}.zh", [sentence("zh", first + i).replace(" ", "") for i in range(lines)])
        for k in range(NIST_REFS):  # reference k: sentence i's words shifted by k, so the four differ
            write(f"{name}.en{k}", [sentence("en", first + i + k) for i in range(lines)])
    sets_file = root / "sets.yaml"
    sets_file.write_text(yaml.safe_dump({"references": NIST_REFS, "sets": {name: lines for name in sets}}))
    return folder, sets_file


def run_nist(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """``recipes/nist_zhen/run.sh`` on the copy in tmp_path/NIST, its work folder tmp_path/work."""
    return run_recipe("nist_zhen", "--data-dir", str(tmp_path / "NIST"), "--work", str(tmp_path / "work"), *args)


def test_the_nist_recipe_runs_end_to_end_and_scores_against_four_references(tmp_path):
    from ordo.evaluation.bleu import corpus_scores

    nist, sets = nist_folder(tmp_path)
    tiny = [word for key in TINY for word in ("--set", key)]
    done = run_nist(tmp_path, "--sets", str(sets), "--budget", "short", *tiny)
    assert done.returncode == 0, done.stderr[-3000:]
    corpus, work = tmp_path / "work" / "corpus", tmp_path / "work" / "short"  # the budget's run and translations
    assert (corpus / "tests.txt").read_text().split() == ["nist03", "nist05"]  # every set but the dev set
    raw, segmented = read_lines(nist / "train.zh"), read_lines(corpus / "train.zh.gz")
    assert [line.replace(" ", "") for line in segmented] == raw  # jieba's words of each line, nothing else
    assert sum(line.count(" ") for line in segmented) > len(raw)
    assert read_lines(corpus / "train.raw.zh.gz") == raw  # and as given, for the lattice systems of nist_verdict
    assert read_lines(corpus / "nist05.raw.zh.gz") == read_lines(nist / "nist05.zh")
    assert read_lines(corpus / "valid.en.gz") == read_lines(nist / "nist02.en0")
    rows = [line.split("\t") for line in (work / "scores.tsv").read_text().splitlines()]
    assert rows[0] == ["test", "checkpoint", "bleu", "bleu_cased", "tok_bleu"]
    assert [row[:2] for row in rows[1:]] == [[test, ckpt] for test in ("nist03", "nist05", "mean")
                                              for ckpt in ("best", "averaged")]
    for test, ckpt, bleu, cased, tok in rows[1:5]:
        hyps = read_lines(work / f"{test}.{ckpt}.hyp")
        refs = [read_lines(nist / f"{test}.en{k}") for k in range(NIST_REFS)]
        assert len(hyps) == 8
        expected = corpus_scores(hyps, refs, tokenized_bleu=True, lowercase=True)
        assert float(bleu) == pytest.approx(float(expected["bleu"]), abs=0.005)
        assert float(tok) == pytest.approx(float(expected["tok_bleu"]), abs=0.005)
        assert float(cased) == pytest.approx(float(corpus_scores(hyps, refs)["bleu"]), abs=0.005)
    for ckpt, mean in zip(("best", "averaged"), rows[5:]):
        tests = [row for row in rows[1:5] if row[1] == ckpt]
        assert float(mean[2]) == pytest.approx(sum(float(row[2]) for row in tests) / 2, abs=0.01)
    assert "nrefs:4|case:lc" in (work / "scores.md").read_text() and "nrefs:4|case:lc" in done.stdout
    # a tiny model's BLEU is 0: the scoring step again on outputs whose sentence i is reference i % 4, upper-cased
    for test in ("nist03", "nist05"):
        refs = [read_lines(nist / f"{test}.en{k}") for k in range(NIST_REFS)]
        for ckpt in ("best", "averaged"):
            (work / f"{test}.{ckpt}.hyp").write_text("".join(refs[i % NIST_REFS][i].upper() + "\n" for i in range(8)))
    score = subprocess.run([sys.executable, str(RECIPES / "nist_zhen" / "corpus.py"), "score", "--work", str(work),
                            "--corpus", str(corpus), "--tests", "nist03 nist05"], capture_output=True, text=True,
                           check=False)
    assert score.returncode == 0, score.stderr
    rows = [line.split("\t") for line in (work / "scores.tsv").read_text().splitlines()[1:]]
    assert all(float(row[2]) == float(row[4]) == 100.0 and float(row[3]) < 30.0 for row in rows)
    one_reference = corpus_scores(read_lines(work / "nist03.best.hyp"), read_lines(nist / "nist03.en0"), lowercase=True)
    assert float(one_reference["bleu"]) < 60.0


@pytest.mark.parametrize("broken", ["missing_reference", "short_reference", "set_count", "train_count"])
def test_the_nist_recipe_names_the_file_of_a_broken_copy(tmp_path, broken):
    nist, sets = nist_folder(tmp_path)
    if broken == "missing_reference":
        (nist / "nist03.en2").unlink()
        message = f"{nist}/nist03.en2: missing (the layout: train.zh and train.en"
    elif broken == "short_reference":
        lines = read_lines(nist / "nist05.en1")
        (nist / "nist05.en1").write_text("".join(f"{line}\n" for line in lines[:-1]), encoding="utf-8")
        message = f"{nist}/nist05.en1: 7 lines, {nist}/nist05.zh has 8 (a reference has a line per source sentence)"
    elif broken == "set_count":
        sets.write_text(yaml.safe_dump({"references": NIST_REFS, "sets": {"nist02": 8, "nist03": 919, "nist05": 8}}))
        message = f"{nist}/nist03.zh: 8 lines, nist03 has 919 (another version of the set?"
    else:
        (nist / "train.en").write_text("one more\n" + (nist / "train.en").read_text(encoding="utf-8"), encoding="utf-8")
        message = f"{nist}/train.en: 41 lines, {nist}/train.zh has 40"
    if broken == "missing_reference":  # through run.sh once: its exit status and message
        done = run_nist(tmp_path, "--sets", str(sets))
        assert done.returncode == 1 and f"nist_zhen: error: {message}" in done.stderr, done.stderr[-2000:]
    else:  # the same check in process (a run.sh start costs seconds)
        with pytest.raises(nist_corpus.LayoutError) as caught:
            nist_corpus.split(nist, tmp_path / "work" / "corpus", sets, "nist02", [], "jieba")
        assert message in str(caught.value)
    assert not (tmp_path / "work" / "corpus").exists()  # checked before anything is written


def test_the_nist_recipe_needs_the_copy_and_known_sets(tmp_path):
    done = run_recipe("nist_zhen")
    assert done.returncode == 2 and "licensed" in done.stderr and "--data-dir" in done.stderr
    _, sets = nist_folder(tmp_path)
    done = run_nist(tmp_path, "--sets", str(sets), "--tests", "nist3")
    assert done.returncode == 1 and "nist_zhen: error: nist3: not a NIST set of the sets file" in done.stderr
    done = run_nist(tmp_path)  # the real counts: MT02 has 878 sentences, MT03 919 ...
    assert done.returncode == 1 and f"{tmp_path}/NIST/nist02.zh: 8 lines, nist02 has 878" in done.stderr
    assert f"{tmp_path}/NIST/nist04.zh: missing" in done.stderr  # every problem is listed at once
