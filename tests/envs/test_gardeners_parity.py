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
from conftest import x64

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
    "seed, kind, size, num_agents, observation, radius",
    [
        (0, "random", 8, 3, "partial", 1),
        (1, "masked", 10, 2, "total", 1),
        (2, "adversarial", 7, 4, "partial", 2),
    ],
)
def test_three_grids_500_turns(tmp_path, seed, kind, size, num_agents, observation, radius):
    ours, theirs = parity(tmp_path, seed, kind, size, num_agents, observation=observation,
                          radius=radius)  # fmt: skip
    assert theirs["error"] is None and len(theirs["action"]) == TURNS
    gardeners_peer.compare(ours, theirs)
    # the runs exercise what they claim: refusals, harvests, plantings, all three rewards
    refused = ours["refused"].mean()
    assert {"random": refused > 0.2, "masked": refused == 0, "adversarial": refused > 0.5}[kind]
    assert theirs["metrics"][-1, 1] > 0 and theirs["metrics"][:, 0].max() > 0
    assert np.all(np.abs(theirs["reward"]).max(axis=(0, 1)) > 0)


@pytest.mark.parametrize(
    "seeds_returned, collisions, bounds",
    [(-1, False, (10, 60)), (0, True, (0, 100)), (3, False, (0, 100))],
)
def test_seed_rules_collisions_and_bounds(tmp_path, seeds_returned, collisions, bounds):
    """No seed system, or 0 or 3 seeds per harvest; agents may share cells without
    collisions (the package's cells then record only the last agent that entered);
    pollution bounds other than 0-100."""
    ours, theirs = parity(tmp_path, 10 + seeds_returned, "random", 5, 4,
                          seeds_returned=seeds_returned, collisions=collisions,
                          bounds=bounds)  # fmt: skip
    assert theirs["error"] is None
    gardeners_peer.compare(ours, theirs)
    if not collisions:  # some agents did share a cell
        position = theirs["position"]
        shared = [len({tuple(p) for p in turn}) < len(turn) for turn in position]
        assert any(shared)


def test_grid_file_with_initial_flowers(tmp_path):
    """Flowers on the grid at reset, at random stages, with four flower types. The
    package can raise on such grids (harvesting a flower nobody planted lowers its planted
    count, whose Shannon index may then divide by zero); this seed runs the whole way."""
    ours, theirs = parity(tmp_path, 7, "masked", 9, 3, flowers=12, num_types=4)
    assert theirs["error"] is None and len(theirs["action"]) == TURNS
    gardeners_peer.compare(ours, theirs)


def test_float32(tmp_path):
    ours, theirs = parity(tmp_path, 3, "random", 8, 3, turns=200, float64=False)
    gardeners_peer.compare(ours, theirs, atol=2e-5)
