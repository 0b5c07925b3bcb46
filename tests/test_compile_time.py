"""``benchmarks/compile_time.py --repeats N`` measures each environment in N fresh
processes and reports the medians with every run."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import compile_time  # noqa: E402


def test_repeats_measure_in_fresh_processes_and_report_the_median(monkeypatch, tmp_path):
    runs = iter([(0.5, 2.0), (0.1, 1.0), (0.2, 4.0)])  # totals 2.5, 1.1, 4.2: median 2.5
    children = []

    def fake_run(command, **kwargs):
        children.append(command)
        trace, compile_ = next(runs)
        row = {
            "name": "arbitrage-v0",
            "agents": 1,
            "reset_trace": 0.1,
            "reset_compile": 0.2,
            "step_trace": trace,
            "step_compile": compile_,
            "fusions": 67,
        }
        return type("Done", (), {"stdout": f"noise\n{compile_time.json.dumps(row)}\n"})()

    monkeypatch.setattr(compile_time.subprocess, "run", fake_run)
    out = tmp_path / "table.md"
    assert compile_time.main(["--envs", "arbitrage-v0", "--repeats", "3", "--out", str(out)]) == 0
    assert len(children) == 3
    assert all(c[-4:] == ["--child", "arbitrage-v0", "--batch", "1024"] for c in children)
    row = out.read_text().splitlines()[-1]
    # medians of each column, the verdict on the median total, every run's total
    assert row == "| arbitrage-v0 | 1 | 0.2 | 2.0 | 67 | 0.1 | 0.2 | yes (2.5) | 2.5, 1.1, 4.2 |"


def test_a_child_prints_its_measurement_as_json(monkeypatch, capsys):
    monkeypatch.setattr(compile_time, "measure", lambda name, batch: {"name": name, "batch": batch})
    assert compile_time.main(["--child", "gardeners-v0", "--batch", "8"]) == 0
    assert compile_time.json.loads(capsys.readouterr().out) == {"name": "gardeners-v0", "batch": 8}
