"""Run the real EthicalSmartGrid package and jaxgrid's smartgrid side by side.

The peer draws its own productions (Python ``random``) and energy pools (NumPy); we read
them off the peer and give them to jaxgrid as explicit productions and a replayed trace,
then feed both the same actions.
"""

from __future__ import annotations

import random
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

peer = pytest.importorskip("smartgrid")

from smartgrid import SmartGrid as PeerSmartGrid  # noqa: E402
from smartgrid import World  # noqa: E402
from smartgrid.agents import Agent, DataOpenEIConversion  # noqa: E402
from smartgrid.agents.profile import comfort as comfort_functions  # noqa: E402
from smartgrid.observation import ObservationManager  # noqa: E402
from smartgrid.rewards.numeric import differentiated, per_agent  # noqa: E402
from smartgrid.util import RandomEnergyGenerator  # noqa: E402

from jaxgrid.envs.smartgrid import OBSERVATION_FIELDS, make_smartgrid  # noqa: E402

DATA = Path(__file__).parents[2] / "jaxgrid" / "data" / "openei"
STEMS = {"Household": "residential", "Office": "office", "School": "school"}
COMFORTS = {
    "Household": comfort_functions.flexible_comfort_profile,
    "Office": comfort_functions.neutral_comfort_profile,
    "School": comfort_functions.strict_comfort_profile,
}
# jaxgrid objective name -> the package's reward class
NUMERIC = {
    "equity": differentiated.Equity,
    "over_consumption": differentiated.OverConsumption,
    "comfort": per_agent.Comfort,
    "multi_objective_sum": differentiated.MultiObjectiveSum,
    "multi_objective_product": differentiated.MultiObjectiveProduct,
    "adaptability_one": differentiated.AdaptabilityOne,
    "adaptability_two": differentiated.AdaptabilityTwo,
    "adaptability_three": differentiated.AdaptabilityThree,
    "equity_per_agent": per_agent.EquityPerAgent,
    "over_consumption_per_agent": per_agent.OverConsumptionPerAgent,
    "multi_objective_sum_per_agent": per_agent.MultiObjectiveSumPerAgent,
    "adaptability_one_per_agent": per_agent.AdaptabilityOnePerAgent,
    "adaptability_two_per_agent": per_agent.AdaptabilityTwoPerAgent,
    "adaptability_three_per_agent": per_agent.AdaptabilityThreePerAgent,
}
ARGUMENTATION = (
    "affordability",
    "environmental_sustainability",
    "inclusiveness",
    "supply_security",
)


def argumentation_classes():
    """The package's argumentation rewards, or None when AJAR is not installed."""
    try:
        from smartgrid.rewards import argumentation
    except Exception:  # the package raises a plain Exception when AJAR is missing
        return None
    return {
        "affordability": argumentation.Affordability,
        "environmental_sustainability": argumentation.EnvironmentalSustainability,
        "inclusiveness": argumentation.Inclusiveness,
        "supply_security": argumentation.SupplySecurity,
    }


def peer_rewards(objectives, judgment=None):
    """Reward instances of the package for our objective names."""
    classes = dict(NUMERIC)
    args = argumentation_classes()
    if args:
        classes.update(args)
    rewards = []
    for name in objectives:
        if name in ARGUMENTATION:
            rewards.append(classes[name](j_transform=judgment) if judgment else classes[name]())
        else:
            rewards.append(classes[name]())
    return rewards


def build_peer(mix: dict[str, int], period: str, rewards, seed: int = 0) -> PeerSmartGrid:
    """The package's environment for an agent mix; productions drawn with ``random.seed(seed)``."""
    random.seed(seed)
    converter = DataOpenEIConversion()
    for profile, stem in STEMS.items():
        converter.load(profile, str(DATA / f"profile_{stem}_{period}.npz"), COMFORTS[profile])
    agents = [
        Agent(f"{profile}{k + 1}", converter.profiles[profile])
        for profile in STEMS
        for k in range(mix.get(profile, 0))
    ]
    return PeerSmartGrid(
        World(agents, RandomEnergyGenerator()), rewards, None, ObservationManager()
    )


def record_peer(env: PeerSmartGrid, actions: np.ndarray, seed: int = 0) -> dict:
    """Step the package with ``actions`` ``(T, n, 6)``; record pools, observations, rewards."""
    names = list(env.agents)
    reward_names = [r.name for r in env.reward_calculator.rewards]
    obs, _ = env.reset(seed=seed)
    pools = [int(env.world.available_energy)]
    observations = [[np.asarray(obs[a]).astype(np.float64) for a in names]]
    rewards, enacted = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for act in actions:
            obs, reward, *_ = env.step({a: act[i] for i, a in enumerate(names)})
            pools.append(int(env.world.available_energy))
            observations.append([np.asarray(obs[a]).astype(np.float64) for a in names])
            rewards.append([[reward[a].get(r, np.nan) for r in reward_names] for a in names])
            enacted.append([list(env.world.agents_by_name[a].enacted_action) for a in names])
    return {
        "pools": np.array(pools, np.float64),
        "obs": np.array(observations),
        "rewards": np.array(rewards, np.float64),
        "enacted": np.array(enacted, np.float64),
        "productions": {
            p: np.asarray(prof.production_fn.production_per_hour, np.float64)
            for p, prof in _profiles(env).items()
        },
        "bounds": env.world.energy_generator.available_energy_bounds(
            0, 0, env.world.min_needed_energy, env.world.max_needed_energy
        ),
    }


def _profiles(env):
    return {a.profile.name: a.profile for a in env.world.agents}


def run_jaxgrid(mix, period, objectives, record, actions, **options) -> dict:
    """jaxgrid's smartgrid replaying the package's pools and productions (float64)."""
    env, params = make_smartgrid(
        households=mix.get("Household", 0),
        offices=mix.get("Office", 0),
        schools=mix.get("School", 0),
        period=period,
        generator="trace",
        energy_series=record["pools"],
        energy_bounds=record["bounds"],
        productions=record["productions"],
        objectives=tuple(objectives),
        peer_energy_loss=True,
        horizon=len(actions) + 10,
        **options,
    )

    @jax.jit
    def rollout(key, actions):
        obs, state = env.reset(key, params)

        def body(state, action):
            obs, state, _, _, _, info = env.step_env(key, state, action, params)
            return state, (
                obs,
                info["reward_vector"],
                info["objective_mask"],
                info["enacted_action"],
            )

        _, (obs_t, rv, mask, enacted) = jax.lax.scan(body, state, actions)
        return obs, obs_t, rv, mask, enacted

    obs0, obs_t, rv, mask, enacted = jax.device_get(
        rollout(jax.random.PRNGKey(0), jnp.asarray(actions))
    )
    return {
        "obs": np.concatenate([obs0[None], obs_t]),
        "rewards": np.where(mask, rv, np.nan),
        "enacted": enacted,
        "env": env,
    }


def action_sequence(kind: str, limits: np.ndarray, steps: int, seed: int = 0) -> np.ndarray:
    """``(steps, n, 6)`` actions in ``[0, limits]``: random, zeros, maximum, or adversarial
    (buy as much as allowed every hour, so the payoff hits its floor, sell more than stored
    every seventh hour, drain and give more than the battery holds)."""
    rng = np.random.default_rng(seed)
    n = len(limits)
    high = np.broadcast_to(limits[None, :, None], (steps, n, 6))
    if kind == "random":
        return rng.uniform(0, 1, (steps, n, 6)) * high
    if kind == "zeros":
        return np.zeros((steps, n, 6))
    if kind == "maximum":
        return np.array(high, np.float64)
    if kind == "adversarial":
        act = rng.uniform(0, 0.2, (steps, n, 6)) * high
        act[..., 1] = high[..., 1]  # consume more than stored
        act[..., 3] = high[..., 3]  # give more than stored
        act[..., 4] = high[..., 4]  # buy far beyond the payoff ...
        act[1::7, :, 5] = high[1::7, :, 5]  # ... and now and then sell more than stored
        return act
    raise ValueError(kind)


def compare(ours: dict, theirs: dict, objectives, atol: float = 1e-5) -> None:
    """Assert every observation field and every reward matches."""
    for k, field in enumerate(OBSERVATION_FIELDS):
        np.testing.assert_allclose(
            ours["obs"][..., k],
            theirs["obs"][..., k],
            atol=atol,
            rtol=0,
            err_msg=f"observation {field}",
        )
    np.testing.assert_allclose(
        ours["enacted"], theirs["enacted"], atol=atol, rtol=0, err_msg="enacted actions"
    )
    for k, name in enumerate(objectives):
        np.testing.assert_allclose(
            ours["rewards"][..., k],
            theirs["rewards"][..., k],
            atol=atol,
            rtol=0,
            err_msg=f"reward {name}",
        )
