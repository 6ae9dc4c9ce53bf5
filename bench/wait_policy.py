"""OpenMP's wait policy on quiet and on shared cores: ``ordo train`` and ``ordo translate`` spinning (OpenMP's
default), waiting passively (``OMP_WAIT_POLICY=PASSIVE``) and as ordo chooses by itself (``auto``:
:mod:`ordo.wait_policy`), beside 0, 1, ... other busy one-thread processes.

Each measured command is a fresh ``ordo`` process with the other work of ``--pause``'s process groups stopped and
``--neighbours`` one-thread busy loops running beside it (a stand-in for another program's computation): training
``--updates`` updates of ``--config`` on ``--data`` (target tokens/s of its "done" line), then beam-5 translation
of ``--translate``'s lines with that run (sentences/s over the whole command, loading included). Policies take
turns in an order that rotates round by round: ``spin`` is OpenMP's default with ordo's choice bypassed (the verb
run through :func:`ordo.cli.run_verb`, as every verb but ``serve`` ran before :mod:`ordo.wait_policy`);
``spin10k`` spins 10,000 times before it sleeps (``GOMP_SPINCOUNT=10000``, where OpenMP's default is 300,000);
``passive`` sets ``OMP_WAIT_POLICY=PASSIVE``; ``auto`` is the ``ordo`` command as it is. The report gives each
round's figures, the better fixed policy (by median), auto's median against its and against spin's (the default
before ordo chose), and what auto chose; the figures also go to ``--out`` with ``.json`` for its suffix.

    python bench/wait_policy.py --config demo_run/run/config.yaml --data demo_run/data \\
        --translate demo_run/text/test.src --neighbours 0 2 --rounds 2 --pause PIDFILE
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

if not __package__:  # run as `python bench/NAME.py`: the repository root, not bench/, first on the path
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from bench.cpu_defaults import others_paused
from bench.machine import cpu_description

ROOT = Path(__file__).resolve().parents[1]
POLICIES = {"spin": {}, "spin10k": {"GOMP_SPINCOUNT": "10000"}, "passive": {"OMP_WAIT_POLICY": "PASSIVE"},
            "auto": {}}
ORDO = "import sys; from ordo.cli import main; sys.exit(main(sys.argv[1:]))"  # what the ordo command runs
BYPASS = ("import sys; from ordo.cli import build_parser, run_verb; "
          "sys.exit(run_verb(build_parser().parse_args(sys.argv[1:])))")  # the verb without ordo's wait policy
FIXED = ("spin", "spin10k", "passive")
USER_NAMES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")
DONE_RATE = re.compile(r"done: .* ([0-9.]+) tgt tok/s")
BUSY_LOOP = "while True: pass"


@contextmanager
def busy_neighbours(count: int) -> Iterator[None]:
    """``count`` one-thread busy loops running for the block."""
    loops = [subprocess.Popen([sys.executable, "-c", BUSY_LOOP]) for _ in range(count)]
    try:
        yield
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()


def policy_env(policy: str) -> dict[str, str]:
    """This process's environment without the user's OpenMP wait settings, plus ``policy``'s."""
    env = {name: value for name, value in os.environ.items() if name not in USER_NAMES}
    return env | POLICIES[policy]


def run_logged(command: Sequence[str], env: dict[str, str], log: Path) -> tuple[float, str]:
    """Run ``command`` from the repository root, output in ``log``: (wall seconds, its output).

    Raises:
        RuntimeError: when it fails, with the log's tail.
    """
    start = time.perf_counter()
    with open(log, "w", encoding="utf-8") as handle:
        code = subprocess.run(list(command), cwd=ROOT, env=env, stdout=handle, stderr=subprocess.STDOUT,
                              check=False).returncode
    seconds = time.perf_counter() - start
    text = log.read_text(encoding="utf-8", errors="replace")
    if code:
        raise RuntimeError(f"{shlex.join(command)} exited with {code} (log {log}):\n" + "\n".join(text.splitlines()[-20:]))
    return seconds, text


def measure(args: argparse.Namespace, policy: str, neighbours: int, tag: str) -> dict[str, object]:
    """One policy's training and translation beside ``neighbours`` busy loops (module docstring)."""
    run_dir = args.work / f"run_{tag}"
    shutil.rmtree(run_dir, ignore_errors=True)
    env = policy_env(policy)
    ordo = [sys.executable, "-c", BYPASS if policy == "spin" else ORDO]
    train = ordo + ["train", str(args.config), "--data", str(args.data), "--out", str(run_dir),
                    "--set", f"train.max_steps={args.updates}", "--set", "train.valid_every=1000000"]
    translate = ordo + ["translate", "--model", str(run_dir), "--checkpoint", "last", "--input", str(args.translate),
                        "--output", str(args.work / f"hyp_{tag}.txt"), "--beam", "5"]
    with others_paused(args.pause), busy_neighbours(neighbours):
        _, train_log = run_logged(train, env, args.work / f"train_{tag}.log")
        seconds, translate_log = run_logged(translate, env, args.work / f"translate_{tag}.log")
    found = DONE_RATE.search(train_log)
    if found is None:
        raise RuntimeError(f"no 'done: ... tgt tok/s' line in {args.work / f'train_{tag}.log'}")
    return {"train": float(found.group(1)), "translate": args.sentences / seconds,
            "passive": "wait passively" in train_log + translate_log}


def shown(path: Path) -> str:
    """``path`` as the report names it: relative to the repository where it lies inside it."""
    resolved = path.resolve()
    return str(resolved.relative_to(ROOT)) if resolved.is_relative_to(ROOT) else path.name


def rotated(items: Sequence[str], index: int) -> list[str]:
    """``items`` rotated left by ``index``."""
    shift = index % len(items)
    return list(items[shift:]) + list(items[:shift])


Rounds = list[dict[str, dict[str, object]]]  # per round: policy -> its figures (measure)


def table(neighbours: int, rounds: Rounds) -> list[str]:
    """The report's rows for one count of neighbours: each policy's figure per round, the better fixed policy
    by median, auto's median against its and against OpenMP's default (spin), and what auto chose."""
    lines = []
    for figure, unit in (("train", "tgt tok/s"), ("translate", "sent/s")):
        values = {policy: [float(one[policy][figure]) for one in rounds] for policy in POLICIES}  # type: ignore[arg-type]
        medians = {policy: statistics.median(found) for policy, found in values.items()}
        better = max(FIXED, key=medians.__getitem__)
        form = "{:,.0f}" if figure == "train" else "{:,.1f}"
        cells = [" / ".join(form.format(value) for value in values[policy]) for policy in POLICIES]
        lines.append(f"| {neighbours} | {figure} ({unit}) | " + " | ".join(cells) + f" | {better} | "
                     f"{medians['auto'] / medians[better]:.2f} | {medians['auto'] / medians['spin']:.2f} |")
    chose = ", ".join(sorted({"passive" if one["auto"]["passive"] else "spin" for one in rounds}))
    return [lines[0] + f" {chose} |", lines[1] + " |"]


def report(args: argparse.Namespace, results: dict[int, Rounds], started: str, command: str) -> str:
    """The markdown report of ``results`` (neighbours -> rounds)."""
    rows = [row for neighbours, rounds in results.items() for row in table(neighbours, rounds)]
    return "\n".join([
        f"# OpenMP's wait policy, quiet and shared cores ({started})", "", f"`{command}`", "",
        (f"CPU: {cpu_description()}; {args.updates} updates of {shown(args.config)}, then beam 5 over "
         f"{args.sentences} lines of {shown(args.translate)} (whole command); one value per round."), "",
        ("| busy neighbours | figure | spin | spin10k | passive | auto | better fixed | auto / better | auto / spin "
         "| auto chose |"), "|---:|---|---:|---:|---:|---:|---|---:|---:|---|", *rows, ""])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, default=ROOT / "demo_run" / "run" / "config.yaml")
    parser.add_argument("--data", type=Path, default=ROOT / "demo_run" / "data")
    parser.add_argument("--translate", type=Path, default=ROOT / "demo_run" / "text" / "test.src")
    parser.add_argument("--updates", type=int, default=60)
    parser.add_argument("--neighbours", type=int, nargs="+", default=[0, 2])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--pause", type=Path, help="a file of process-group ids to stop while a command runs")
    parser.add_argument("--work", type=Path, default=Path("/tmp/ordo_wait_policy"))
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "wait_policy.md")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    args.sentences = len(args.translate.read_text(encoding="utf-8").splitlines())
    started = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    results: dict[int, Rounds] = {}
    for neighbours in args.neighbours:
        results[neighbours] = []
        for index in range(args.rounds):
            found = {}
            for policy in rotated(list(POLICIES), index):
                found[policy] = measure(args, policy, neighbours, f"{neighbours}_{index}_{policy}")
                print(neighbours, index, policy, found[policy], flush=True)
            results[neighbours].append(found)
    text = report(args, results, started, "python bench/wait_policy.py " + shlex.join(sys.argv[1:]))
    args.out.write_text(text, encoding="utf-8")
    args.out.with_suffix(".json").write_text(json.dumps(results, indent=1), encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
