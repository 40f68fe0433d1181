"""The launcher's reading of a failed run, without launching anything: which failure is worth a
relaunch, and the stderr a rank left behind."""

from __future__ import annotations

import os
import time

from stratagem.runtime.launch import killed_by_signal, stderr_tail

DIED = "rank 3 died without a report (killed by signal 6); its stderr ends:\nterminate called"


def test_only_a_rank_killed_by_a_signal_as_the_root_cause_is_worth_a_relaunch():
    assert killed_by_signal(f"run on 4 ranks failed: {DIED}; rank 0 was stopped by torchrun (SIGTERM)")
    assert not killed_by_signal("run on 4 ranks failed: rank 1 failed in task 'plan0' at step 2: "
                                f"RuntimeError: shapes differ; {DIED}")
    assert not killed_by_signal("run on 2 ranks failed: rank 1 died without a report (exit code 13)")
    assert not killed_by_signal("run on 2 ranks failed: the watchdog stopped the run after 80 s")


def test_the_stderr_tail_is_the_latest_launch_of_that_local_rank_without_blank_or_module_lines(tmp_path):
    old = tmp_path / "run-a" / "attempt_0" / "1" / "stderr.log"
    new = tmp_path / "run-b" / "attempt_0" / "1" / "stderr.log"
    for path in (old, new):
        path.parent.mkdir(parents=True)
    old.write_text("from the first launch\n")
    new.write_text("warning\n\nterminate called\nFatal Python error: Aborted\nExtension modules: torch._C\n"
                   + "".join(f"frame {i}\n" for i in range(30)))
    past = time.time() - 60
    os.utime(old, (past, past))
    tail = stderr_tail(tmp_path, 1, num_lines=5).splitlines()
    assert tail == [f"frame {i}" for i in range(25, 30)]
    assert "Extension modules" not in stderr_tail(tmp_path, 1, num_lines=40)
    assert stderr_tail(tmp_path, 1, num_lines=40).startswith("warning\nterminate called")
    assert stderr_tail(tmp_path, 0) == ""
