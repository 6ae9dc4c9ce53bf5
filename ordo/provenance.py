"""What a run trained on: the code, the library, the device and the numerics of each start of ``ordo train``.

A score moves with more than the seed: another commit, another CPU kind (its products' rounding), another thread
count or precision. ``ordo train`` appends one record per start (a fresh run or a resume) to
``RUN/environment.yaml`` (:func:`record_start`), and ``ordo analyze seeds`` compares the records of the runs it
tests (:func:`differences`): a test over seeds is sound only when the runs differ in the seed alone.
"""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
import yaml

import ordo
from ordo.data.textio import atomic_write
from ordo.errors import InputError
from ordo.gemm import cpuinfo

ENVIRONMENT_FILE = "environment.yaml"
COMPARED = ("ordo", "commit", "torch", "device", "threads", "precision", "cpu_gemm", "processes")


def source_commit(package: Path = Path(ordo.__file__).parent) -> str | None:
    """The git commit of the checkout ``package`` lies in, with ``+changes-HASH`` when its files differ from it
    (HASH: of the changes and the untracked files' names, so two runs on different changes differ); None where
    ``package`` is not at the top of a git checkout (an installed package, even in a virtualenv inside another
    project's checkout) or git is missing."""
    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(package), *args], capture_output=True, text=True, timeout=10,
                                  check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    top = git("rev-parse", "--show-toplevel")
    if top is None or Path(top).resolve() != package.resolve().parent:  # not ordo's own checkout: a venv in another
        return None
    head = git("rev-parse", "HEAD")
    if not head:
        return None
    changed = git("status", "--porcelain", "--", ".")
    if not changed:
        return head
    digest = hashlib.sha256(f"{git('diff', 'HEAD', '--', '.')}\n{changed}".encode()).hexdigest()[:12]
    return f"{head}+changes-{digest}"


def device_name(device: torch.device) -> str:
    """A GPU's name, or the CPU's model name with its family and model numbers (``/proc/cpuinfo``), which tell
    CPU generations apart that share a marketing name."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    info = cpuinfo()
    return f"{info.get('model name', 'unknown CPU')} (family {info.get('cpu family', '?')} model {info.get('model', '?')})"


def environment(device: torch.device, precision: torch.dtype | None, cpu_gemm: str, processes: int) -> dict[str, Any]:
    """This process's record: ordo's version and commit, torch's version, the device, threads, the autocast
    ``precision`` (None: float32), the CPU product backend setting and the number of training processes."""
    return {"ordo": ordo.__version__, "commit": source_commit(), "torch": str(torch.__version__),
            "device": device_name(device), "threads": torch.get_num_threads(),
            "precision": str(precision).removeprefix("torch.") if precision is not None else "float32",
            "cpu_gemm": cpu_gemm if device.type == "cpu" else "-", "processes": processes}


def read_environment(run_dir: Path) -> list[dict[str, Any]]:
    """The records of ``run_dir``, oldest first; empty for a run trained before ordo kept them.

    Raises:
        InputError: naming the file when it is not a YAML list of records.
    """
    path = Path(run_dir) / ENVIRONMENT_FILE
    if not path.is_file():
        return []
    try:
        records = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise InputError(f"{path}: not YAML ({err})") from None
    if not isinstance(records, list) or not all(isinstance(record, dict) for record in records):
        raise InputError(f"{path}: expected a list of records, one per start of ordo train")
    return records


def record_start(run_dir: Path, update: int, record: Mapping[str, Any]) -> None:
    """Append ``record`` of a start at ``update`` (0: a fresh run) to ``run_dir``'s records, atomically."""
    records = [*read_environment(run_dir), {"update": update, **record}]
    with atomic_write(Path(run_dir) / ENVIRONMENT_FILE) as handle:
        yaml.safe_dump(records, handle, sort_keys=False)


def differences(runs: Sequence[tuple[str, Sequence[Mapping[str, Any]]]]) -> list[str]:
    """What the (name, records) ``runs`` differ in, each as ``FIELD: VALUE (NAMES); VALUE (NAMES)``, over every
    start of every run (a run resumed on another machine differs from itself), among :data:`COMPARED`; and a
    line naming the runs without records, which cannot be checked. Runs without records take no part in the
    fields' comparison."""
    found = []
    for field in COMPARED:
        holders: dict[str, list[str]] = {}
        for name, records in runs:
            for value in dict.fromkeys(str(record.get(field)) for record in records):
                holders.setdefault(value, []).append(name)
        if len(holders) > 1:
            found.append(f"{field}: " + "; ".join(f"{value} ({', '.join(names)})" for value, names in holders.items()))
    unrecorded = [name for name, records in runs if not records]
    if unrecorded:
        found.append(f"no {ENVIRONMENT_FILE} (trained before ordo recorded it): {', '.join(unrecorded)}")
    return found


def check_seed_runs(base_runs: Sequence[Path], system_runs: Sequence[Path], allow_mixed: bool = False) -> str:
    """Compare the records of the runs behind a test over seeds (``ordo analyze seeds --baseline-run/--system-run``)
    and say what the verdict table shows of them: ``alike`` or, with ``allow_mixed``, ``differ: ...``.

    Raises:
        InputError: when the runs differ (or some have no records) and ``allow_mixed`` is false, naming each
            difference: the t-test then measures the difference too, not the method alone.
    """
    runs = [(str(run), read_environment(run)) for run in (*base_runs, *system_runs)]
    found = differences(runs)
    if not found:
        return f"alike ({sum(len(records) for _, records in runs)} starts of {len(runs)} runs)"
    if not allow_mixed:
        raise InputError("the runs differ in more than the seed, so the test would measure that too: "
                         + " | ".join(found) + "; train them alike, or give --allow-mixed to test them anyway")
    return "differ: " + " | ".join(found)
