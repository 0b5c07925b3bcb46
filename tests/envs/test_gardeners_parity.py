"""Parity with the real ``ethical-gardeners`` 0.0.1: observations, action masks, every
reward component, the metrics and the agents' money, seeds and positions, turn by turn.

Both sides start from the same grid file (random obstacles, agents with random money and
small seed stocks, random flower types) and take the same actions: ``random`` (any
action, so many are refused), ``masked`` (allowed ones only) and ``adversarial`` (mostly
forbidden ones: invalid moves, planting without seeds or on a flower, harvesting nothing
or unripe flowers). Seed returns use fixed rules: the package draws its random returns
(codes -2 and -3) from its own NumPy stream, which a JAX key cannot reproduce; those rules
are tested by their distribution in ``test_gardeners.py``. jaxgrid runs in float64 here
(one run in float32). Skipped when the package is not installed (the ``test`` extra).
"""

import numpy as np
import pytest
from conftest import full_only, sampled, x64

gardeners_peer = pytest.importorskip("gardeners_peer")

TURNS = 500


def parity(tmp_path, seed, kind, size, num_agents, turns=TURNS, flowers=0, num_types=3,
           observation="partial", radius=1, seeds_returned=1, collisions=True,
           bounds=(0, 100), float64=True):  # fmt: skip
    rng = np.random.default_rng(seed)
    grid = gardeners_peer.write_grid(
        tmp_path / "grid.txt", rng, size, num_agents, flowers=flowers, num_types=num_types
    )
    peer = gardeners_peer.build_peer(
        grid, observation, radius, seeds_returned, collisions, bounds[0], bounds[1]
    )
    theirs = gardeners_peer.record_peer(peer, kind, turns, seed=seed)
    options = dict(
        observation=observation, view_radius=radius, num_seeds_returned=seeds_returned,
        collisions=collisions, min_pollution=bounds[0], max_pollution=bounds[1],
    )  # fmt: skip
    if float64:
        with x64():
            ours = gardeners_peer.run_jaxgrid(grid, theirs["action"], **options)
    else:
        ours = gardeners_peer.run_jaxgrid(grid, theirs["action"], **options)
    return ours, theirs


@pytest.mark.parametrize(
    "seed, kind, size, num_agents, options",
    sampled(
        [
            (0, "random", 8, 3, {}),
            # flowers at random stages on the grid at reset, four flower types, no seed returned
            (
                1,
                "masked",
                7,
                2,
                dict(observation="total", flowers=10, num_types=4, seeds_returned=0),
            ),
            # no seed system, pollution bounds 10-60, a wider window
            (2, "adversarial", 6, 4, dict(radius=2, seeds_returned=-1, bounds=(10, 60))),
            # agents may share cells (the package's cells then record the last agent in)
            (3, "random", 5, 4, dict(collisions=False, seeds_returned=3)),
        ],
        keep=[(0, "random", 8, 3, {})],
    ),
)
def test_500_turns(tmp_path, seed, kind, size, num_agents, options):
    ours, theirs = parity(tmp_path, seed, kind, size, num_agents, **options)
    # the package can raise on grids with initial flowers (harvesting a flower nobody
    # planted lowers its planted count, whose Shannon index may then divide by zero);
    # these seeds run the whole way
    assert theirs["error"] is None and len(theirs["action"]) == TURNS
    gardeners_peer.compare(ours, theirs)
    # the runs exercise what they claim: refusals, harvests, plantings, all three rewards
    refused = ours["refused"].mean()
    assert {"random": refused > 0.2, "masked": refused == 0, "adversarial": refused > 0.5}[kind]
    assert theirs["metrics"][-1, 1] > 0 and theirs["metrics"][:, 0].max() > 0
    assert np.all(np.abs(theirs["reward"]).max(axis=(0, 1)) > 0)
    if not options.get("collisions", True):
        assert any(len({tuple(p) for p in turn}) < len(turn) for turn in theirs["position"])


@full_only
def test_float32(tmp_path):
    ours, theirs = parity(tmp_path, 4, "random", 6, 3, turns=200, float64=False)
    gardeners_peer.compare(ours, theirs, atol=2e-5)
