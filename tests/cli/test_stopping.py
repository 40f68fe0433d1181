"""Progress and Ctrl-C in `stratagem plan` and `stratagem frontier` (cli.stopping): nothing but the
results when piped; a first Ctrl-C writes the best plan found so far, a valid plan file that says
the search was stopped, and exits as usual; a second aborts with 130, the file left as it was.

The reporter the commands build (Console.progress) is replaced by one that raises KeyboardInterrupt
at a chosen advance() call, or sends this process SIGINT there, as a Ctrl-C would."""

from __future__ import annotations

import contextlib
import os
import signal
import threading

import pytest

from stratagem.cli import main
from stratagem.plan import Frontier, Plan
from stratagem.report.console import Console
from stratagem.search.stopping import interruption
from tests.search.recorder import Recorder

ARGS = ["plan", "rnn-tiny", "--cluster", "v100-2x8", "--devices", "2"]


def reporting_to(monkeypatch, recorder: Recorder) -> Recorder:
    @contextlib.contextmanager
    def progress(self):
        yield recorder
    monkeypatch.setattr(Console, "progress", progress)
    return recorder


def ctrl_c() -> None:
    os.kill(os.getpid(), signal.SIGINT)


@pytest.fixture(scope="module")
def whole_run(tmp_path_factory):
    """What the plan command tells its reporter when nothing stops it."""
    with pytest.MonkeyPatch.context() as patch:
        recorder = reporting_to(patch, Recorder())
        assert main([*ARGS, "-o", str(tmp_path_factory.mktemp("whole") / "plan.json")]) == 0
    return recorder


def test_piped_the_commands_print_their_results_and_no_progress(tmp_path, capsys):
    assert main([*ARGS, "-o", str(tmp_path / "plan.json")]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("plan: rnn-tiny on v100-2x8") and out.rstrip().endswith(f"written to {tmp_path / 'plan.json'}")
    assert err == "" and "\x1b" not in out and "━" not in out and "cost tables" not in out


def test_the_plan_command_shows_capture_planning_and_each_search_phase(whole_run):
    names = [p.name for p in whole_run.phases()]
    assert names[:4] == ["capturing rnn-tiny", "planning rnn-tiny (ft, mini-time)", "cost tables: ops",
                         "cost tables: edges"]
    assert "FT pass 1: eliminations" in names and names[-1] == "simulating frontier points"


def test_ctrl_c_writes_the_best_plan_found_so_far_and_says_so(whole_run, tmp_path, monkeypatch, capsys):
    reporting_to(monkeypatch, Recorder(stop_after=whole_run.calls_before("simulating") + 1))
    path = tmp_path / "plan.json"
    assert main([*ARGS, "-o", str(path)]) == 0
    out = capsys.readouterr().out
    assert "interrupted      search stopped by Ctrl-C during simulating frontier points" in out
    plan = Plan.load(path)                      # the faster of the point simulated and data parallel
    assert plan.algorithm in ("ft", "data-parallel") and interruption(plan.details).kept.startswith("the 1 of")


needs_main_thread = pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                                       reason="SIGINT handlers are the main thread's")


@needs_main_thread
def test_a_real_sigint_stops_the_search_and_the_plan_is_written(whole_run, tmp_path, monkeypatch, capsys):
    reporting_to(monkeypatch, Recorder(stop_after=whole_run.calls_before("FT pass 2") + 1, on_stop=ctrl_c))
    path, before = tmp_path / "plan.json", signal.getsignal(signal.SIGINT)
    assert main([*ARGS, "-o", str(path)]) == 0
    out, err = capsys.readouterr()
    assert "Ctrl-C: stopping the search" in err and "during FT pass 2 (eliminations)" in out
    assert interruption(Plan.load(path).details).kept.startswith("the frontier of the passes done")
    assert signal.getsignal(signal.SIGINT) is before                              # the handler is put back


@needs_main_thread
def test_a_second_sigint_aborts_and_leaves_the_file_as_it_was(whole_run, tmp_path, monkeypatch, capsys):
    reporting_to(monkeypatch, Recorder(stop_after=whole_run.calls_before("FT pass 2") + 1, on_stop=ctrl_c,
                                       again=True))
    path = tmp_path / "plan.json"
    path.write_text("the plan before")
    assert main([*ARGS, "-o", str(path)]) == 130
    assert "aborted (Ctrl-C twice)" in capsys.readouterr().err
    assert path.read_text() == "the plan before" and os.listdir(tmp_path) == ["plan.json"]


def test_the_frontier_command_stopped_writes_the_points_simulated_so_far(tmp_path, monkeypatch, capsys):
    whole = reporting_to(monkeypatch, Recorder())
    assert main(["frontier", "rnn-tiny", "--devices", "2"]) == 0
    points = next(p for p in whole.phases() if p.name == "simulating frontier points")
    assert points.total > 1
    reporting_to(monkeypatch, Recorder(stop_after=whole.calls_before("simulating") + 1))
    path = tmp_path / "frontier.json"
    assert main(["frontier", "rnn-tiny", "--devices", "2", "-o", str(path)]) == 0
    assert "search stopped by Ctrl-C during simulating frontier points" in capsys.readouterr().out
    front = Frontier.load(path)
    assert len(front) == 1 and interruption(front.details).phase == "simulating frontier points"


@needs_main_thread
def test_a_real_sigint_while_points_simulate_in_forked_workers_leaves_no_process(tmp_path, monkeypatch, capsys):
    whole = reporting_to(monkeypatch, Recorder())
    assert main(["frontier", "rnn-tiny", "--devices", "2"]) == 0
    reporting_to(monkeypatch, Recorder(stop_after=whole.calls_before("simulating") + 1, on_stop=ctrl_c))
    path = tmp_path / "frontier.json"
    assert main(["frontier", "rnn-tiny", "--devices", "2", "-o", str(path)]) == 0
    assert "search stopped by Ctrl-C during simulating frontier points" in capsys.readouterr().out
    assert len(Frontier.load(path)) >= 1
    with pytest.raises(ChildProcessError):          # every worker forked was reaped
        os.waitpid(-1, os.WNOHANG)
