"""``jaxgrid demo`` reports how often a power flow failed and no physical figure from
those steps (it used to print a mean loss of 1e4 MW on a 3.7 MW feeder)."""

from conftest import full_only

from jaxgrid.cli import main


def table(text: str) -> dict:
    """``{policy: {column: cell}}`` of the demo's markdown table."""
    lines = [line for line in text.splitlines() if line.startswith("| ")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines[1:]]
    return {row[0]: dict(zip(header, row)) for row in rows}


@full_only
def test_demo_reports_failures_and_only_solved_physics(capsys):
    assert main(["demo", "--env", "voltage33-v0", "--envs", "16"]) == 0
    rows = table(capsys.readouterr().out)
    assert float(rows["random"]["power_flow_failed"]) > 0.01  # random reactive power collapses it
    assert float(rows["no_control"]["power_flow_failed"]) == 0.0
    for row in rows.values():
        assert 0.0 <= float(row["loss_mw"]) < 3.7  # MW: below the feeder's whole load
        assert float(row["cost:power_flow"]) == float(row["power_flow_failed"])
