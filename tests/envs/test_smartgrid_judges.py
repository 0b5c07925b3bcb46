"""The four argumentation rewards against the package's own judgments (needs AJAR).

AJAR 1.0.0 is not on PyPI (the PyPI project ``ajar`` is an unrelated chess package), so
these tests skip where it is missing; ``tests/rewards/test_argumentation.py`` covers the
specification's worked examples and every aliveness pattern without it. To run them:
``pip install git+https://github.com/ethicsai/ajar.git@v1.0.0``.
"""

import jax.numpy as jnp
import numpy as np
import pytest
from conftest import x64

smartgrid_peer = pytest.importorskip("smartgrid_peer")
if smartgrid_peer.argumentation_classes() is None:
    pytest.skip("AJAR 1.0.0 is not installed", allow_module_level=True)

from ajar import judgment as ajar_judgment  # noqa: E402
from smartgrid.agents import Action  # noqa: E402

from jaxgrid.devices.prosumer import ProsumerState  # noqa: E402
from jaxgrid.envs.smartgrid import SmartgridState, make_smartgrid  # noqa: E402

MIX = {"Household": 3, "Office": 2, "School": 1}
OBJECTIVES = smartgrid_peer.ARGUMENTATION
COMFORT_THRESHOLDS = [0.75, 0.85, 0.9, 0.91, 0.94, 0.95, 0.96, 0.98]


def near(rng, values, size, spread):
    """Draws concentrated at the thresholds: a threshold plus a tiny or a small offset."""
    base = rng.choice(values, size)
    offset = rng.choice([0.0, 1e-12, -1e-12, spread, -spread], size) * rng.uniform(0, 1, size)
    return base + offset


def random_situation(rng, n, need_scale):
    """Agent states and enacted actions concentrated at the graphs' thresholds."""
    need = np.round(rng.uniform(0, 1, n) * need_scale)
    comfort = np.clip(near(rng, COMFORT_THRESHOLDS, n, 0.02), 0, 1)
    factors = np.array([0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.55, 0.75, 1.1, 1.2, 1.3])
    buy = need * near(rng, factors, n, 0.05)
    consumption = need * near(rng, factors, n, 0.05)
    grid = consumption * rng.uniform(0, 1, n)
    enacted = np.stack(
        [
            grid,
            consumption - grid,
            rng.uniform(0, 300, n),
            need * near(rng, factors, n, 0.05),
            np.abs(buy),
            rng.uniform(0, 200, n),
        ],
        axis=1,
    )
    return dict(
        need=need,
        comfort=comfort,
        storage=rng.uniform(0, 1, n),
        production=np.round(rng.uniform(0, 50, n)),
        payoff=np.round(rng.choice([-1, 0, 1, 50], n) * rng.uniform(0, 1, n)),
        enacted=enacted,
        pool=float(rng.choice([130000, 190000, 150000, 250000]) + rng.choice([-1, 0, 1])),
    )


@pytest.mark.parametrize("judgment", ["simple", "diff", "grad", "offset", "ratio"])
def test_judgments_match_the_package_on_threshold_situations(judgment):
    ajar_judgment.j_ratio.best_acceptable_count = 0  # the package's process-wide maximum
    rewards = smartgrid_peer.peer_rewards(OBJECTIVES, getattr(ajar_judgment, f"j_{judgment}"))
    peer_env = smartgrid_peer.build_peer(MIX, "annually", rewards)
    agents = list(peer_env.world.agents)
    capacity = np.array([a.profile.max_storage for a in agents], np.float64)
    n = len(agents)
    rng = np.random.default_rng(["simple", "diff", "grad", "offset", "ratio"].index(judgment))
    with x64():
        env, params = make_smartgrid(
            households=3, offices=2, schools=1, objectives=OBJECTIVES, judgments=judgment
        )
        evaluate = __import__("jax").jit(env.evaluate_objectives)
        ratio_max = jnp.zeros(())
        checked = 0
        for _ in range(180):  # 180 worlds x 6 agents = 1080 judged situations per reward
            s = random_situation(rng, n, need_scale=rng.choice([1000.0, 20000.0]))
            storage = np.round(s["storage"] * capacity)
            for i, agent in enumerate(agents):
                agent.state.need = s["need"][i]
                agent.state.comfort = s["comfort"][i]
                agent.state.storage = storage[i]
                agent.state.production = s["production"][i]
                agent.state.payoff = s["payoff"][i]
                agent.enacted_action = Action(*s["enacted"][i])
            peer_env.world.available_energy = s["pool"]
            theirs = np.array(
                [
                    [peer_env.reward_calculator.compute(peer_env.world, a)[r.name] for r in rewards]
                    for a in agents
                ]
            )
            zeros = jnp.zeros(n)
            state = SmartgridState(
                time=jnp.int32(1),
                buildings=ProsumerState(
                    storage=jnp.asarray(storage),
                    previous_storage=zeros,
                    need=jnp.asarray(s["need"]),
                    production=jnp.asarray(s["production"]),
                    comfort=jnp.asarray(s["comfort"]),
                    payoff=jnp.asarray(s["payoff"]),
                ),
                available_energy=jnp.asarray(s["pool"]),
                production_key=jnp.zeros(2, jnp.uint32),
                ratio_max=ratio_max,
                measures=jnp.zeros(8),
            )
            ours, _, ratio_max = evaluate(state, jnp.asarray(s["enacted"]).T, params)
            np.testing.assert_allclose(np.asarray(ours), theirs, atol=1e-12, rtol=0)
            checked += n
    assert checked >= 1000
