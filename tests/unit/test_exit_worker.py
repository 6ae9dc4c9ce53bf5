"""A torchrun worker ends through exit_worker: the verb's status, with buffered output written out."""

import subprocess
import sys
import textwrap


def test_exit_worker_keeps_the_status_and_flushes_buffered_output():
    script = textwrap.dedent("""
        import sys
        from ordo.training.distributed import exit_worker
        sys.stdout = open(sys.stdout.fileno(), "w", buffering=65536, closefd=False)
        sys.stderr = open(sys.stderr.fileno(), "w", buffering=65536, closefd=False)
        print("finished")
        print("saved step_8.pt", file=sys.stderr)
        exit_worker(3)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 3
    assert (done.stdout, done.stderr) == ("finished\n", "saved step_8.pt\n")
