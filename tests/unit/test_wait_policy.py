"""OpenMP's wait policy per verb (ordo.wait_policy): passive where other work keeps the cores busy."""

import subprocess
import sys

import pytest

from ordo import wait_policy
from ordo.cli import set_verb_environment


def readings(*runnable: int):
    """A reader of /proc/loadavg whose successive texts count ``runnable`` runnable threads."""
    texts = iter(f"0.52 0.58 0.59 {count}/467 18453" for count in runnable)
    return lambda: next(texts)


def test_the_run_queue_is_read_from_loadavgs_fourth_field():
    assert wait_policy.runnable_threads("0.52 0.58 0.59 3/467 18453\n") == 3


def test_other_threads_count_only_when_they_run_through_every_reading():
    assert wait_policy.other_runnable(readings(3, 3, 2, 3), samples=4, gap_s=0) == 1  # this reader is one of them
    assert wait_policy.other_runnable(readings(3, 1), samples=4, gap_s=0) == 0  # a process passing by: the
    # reader stops at the first reading with no other thread (a third would raise StopIteration)

    def missing() -> str:
        raise FileNotFoundError("/proc/loadavg")

    assert wait_policy.other_runnable(missing, samples=4, gap_s=0) is None


def test_a_process_that_keeps_running_is_counted_on_the_real_run_queue():
    busy = subprocess.Popen([sys.executable, "-c", "print('looping', flush=True)\nwhile True: pass"],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert busy.stdout is not None and busy.stdout.readline() == "looping\n"
        assert wait_policy.other_runnable() >= 1
    finally:
        busy.kill()
        busy.wait()


@pytest.mark.parametrize("verb", ["train", "translate", "demo"])
def test_a_computing_verb_waits_passively_beside_other_work_and_says_so(verb):
    environ: dict[str, str] = {}
    note = wait_policy.set_wait_policy(verb, environ, count_others=lambda: 2)
    assert environ == {"OMP_WAIT_POLICY": "PASSIVE"}
    assert note is not None and "2 other thread(s)" in note and f"ordo {verb}" in note


def test_quiet_cores_a_verb_that_does_not_compute_or_no_run_queue_keep_openmps_spinning():
    for verb, others in (("train", 0), ("translate", None), ("evaluate", 3), ("prepare", 3)):
        environ: dict[str, str] = {}
        assert wait_policy.set_wait_policy(verb, environ, count_others=lambda found=others: found) is None
        assert environ == {}, verb


def test_serve_always_waits_passively():
    environ: dict[str, str] = {}
    assert wait_policy.set_wait_policy("serve", environ, count_others=lambda: 0) is None
    assert environ == {"OMP_WAIT_POLICY": "PASSIVE"}


@pytest.mark.parametrize("setting", [{"OMP_WAIT_POLICY": "ACTIVE"}, {"GOMP_SPINCOUNT": "10000"},
                                     {"LOCAL_WORLD_SIZE": "2"}])
def test_the_users_setting_or_a_torchrun_worker_is_left_alone(setting):
    def never() -> int:
        raise AssertionError("the run queue is not read where the user chose")

    for verb in ("train", "serve"):
        environ = dict(setting)
        assert wait_policy.set_wait_policy(verb, environ, count_others=never) is None
        assert environ == setting


def test_the_cli_sets_the_policy_before_torch_loads_and_prints_why(monkeypatch, capsys):
    monkeypatch.setenv("OMP_WAIT_POLICY", "")  # so that the teardown restores what was there before
    monkeypatch.delenv("OMP_WAIT_POLICY")
    monkeypatch.setattr(wait_policy, "other_runnable", lambda: 1)
    set_verb_environment(["train", "config.yaml"])
    assert wait_policy.os.environ["OMP_WAIT_POLICY"] == "PASSIVE"
    assert "1 other thread(s)" in capsys.readouterr().err
    code = "import ordo.cli, sys; print('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip() == "False"
