"""Run the real ``ethical-gardeners`` package and jaxgrid's gardeners side by side.

Both start from the same grid file (written here in the package's text format and read
by each side's own reader), take the same actions and use a fixed seed-return rule, so
no random number of either side enters the comparison. The package is an AEC game: the
actions are chosen here one agent at a time from the package's own current mask (for the
``masked`` and ``adversarial`` kinds), recorded, and then replayed turn by turn in jaxgrid.
"""

from __future__ import annotations

import contextlib
import io
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("ethicalgardeners")

with contextlib.redirect_stdout(io.StringIO()):  # hydra announces its config path on import
    from ethicalgardeners.action import create_action_enum
    from ethicalgardeners.actionhandler import ActionHandler
    from ethicalgardeners.gardenersenv import GardenersEnv
    from ethicalgardeners.gridworld import GridWorld
    from ethicalgardeners.metricscollector import MetricsCollector
    from ethicalgardeners.observation import PartialObservation, TotalObservation
    from ethicalgardeners.rewardfunctions import RewardFunctions

from jaxgrid.envs.gardeners import make_gardeners  # noqa: E402

COMPONENTS = ("ecology", "wellbeing", "biodiversity")


def write_grid(path: Path, rng: np.random.Generator, size: int, num_agents: int,
               obstacles: float = 0.2, num_types: int = 3, flowers: int = 0) -> Path:  # fmt: skip
    """A random square grid file in the package's format: obstacles, ``flowers`` initial
    flowers at random stages, agents with random money and small seed stocks (some
    infinite, some empty) and flower types with random prices and reductions."""
    codes = np.where(rng.random((size, size)) < obstacles, "O", "G").astype(object)
    ground = list(zip(*np.nonzero(codes == "G")))
    picks = rng.choice(len(ground), num_agents + flowers, replace=False)
    reductions = [
        [float(rng.choice([0, 0.5, 1, 2, 3, 5])) for _ in range(rng.integers(1, 6))]
        for _ in range(num_types)
    ]
    for k, cell in enumerate(ground[i] for i in picks):
        if k < num_agents:
            codes[cell] = f"A{k}"
        else:
            kind = int(rng.integers(num_types))
            codes[cell] = f"F{kind}_{rng.integers(len(reductions[kind]))}"
    lines = [f"{size} {size}"] + [" ".join(row) for row in codes]
    order = rng.permutation(num_agents)  # agent lines need not follow the ids
    for k in order:
        seeds = "|".join(str(rng.choice([-1, 0, 1, 2, 4])) for _ in range(num_types))
        lines.append(f"{k},{int(rng.integers(0, 50))},{seeds}")
    for t, r in enumerate(reductions):
        lines.append(f"{t},{int(rng.integers(1, 20))},{'|'.join(f'{x:g}' for x in r)}")
    path.write_text("\n".join(lines) + "\n")
    return path


def build_peer(grid: Path, observation="partial", radius=1, seeds_returned=1, collisions=True,
               min_pollution=0, max_pollution=100) -> GardenersEnv:  # fmt: skip
    """The package's environment on ``grid`` (no rendering, no metric export)."""
    rng = np.random.RandomState(0)
    world = GridWorld.init_from_file(
        {"file_path": str(grid)}, rng, min_pollution=min_pollution, max_pollution=max_pollution,
        num_seeds_returned=seeds_returned, collisions_on=collisions,
    )  # fmt: skip
    actions = create_action_enum(len(world.flowers_data))
    strategy = TotalObservation(world) if observation == "total" else PartialObservation(radius)
    return GardenersEnv(
        rng, world, actions, 10**9, "none", ActionHandler(world, actions), strategy,
        RewardFunctions(actions), MetricsCollector("./metrics", False, False), [],
    )  # fmt: skip


def choose(kind: str, mask: np.ndarray, rng: np.random.Generator) -> int:
    """``random``: any action; ``masked``: an allowed one; ``adversarial``: a forbidden
    one three times in four (invalid moves, planting without seeds or on a flower,
    harvesting nothing or unripe flowers)."""
    allowed, forbidden = np.flatnonzero(mask), np.flatnonzero(mask == 0)
    if kind == "random":
        return int(rng.integers(len(mask)))
    if kind == "adversarial" and len(forbidden) and rng.random() < 0.75:
        return int(rng.choice(forbidden))
    return int(rng.choice(allowed))


def record_peer(env: GardenersEnv, kind: str, turns: int, seed: int = 0) -> dict:
    """Play ``turns`` turns; per turn the actions, each agent's reward components as the
    package hands them (its ``infos``), and after the turn every observation, mask, the
    metrics and the agents' money, seeds and positions. Stops early where the package
    raises (see :func:`test_gardeners_parity.test_grid_file_with_initial_flowers`)."""
    rng = np.random.default_rng(seed)
    env.reset()
    names = env.possible_agents
    out = {
        k: [] for k in ("action", "reward", "obs", "mask", "money", "seeds", "position", "metrics")
    }

    def snapshot():
        out["obs"].append(np.stack([env.observations[a]["observation"] for a in names]))
        out["mask"].append(
            np.stack([env.observations[a]["action_mask"] for a in names]).astype(bool)
        )
        agents = [env.agents[a] for a in names]
        out["money"].append([ag.money for ag in agents])
        out["seeds"].append([[ag.seeds[t] for t in sorted(ag.seeds)] for ag in agents])
        out["position"].append([ag.position for ag in agents])
        m = env.metrics_collector.metrics
        out["metrics"].append(
            [m["total_planted_flowers"], m["total_harvested_flowers"], m["avg_pollution_percent"]]
            + [m[f"num_cells_pollution_above_{t}"] for t in (25, 50, 75, 90)]
        )

    snapshot()
    out["metrics"].pop()  # the package's metrics exist only after a step
    out["error"] = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the package warns at every refused action
        for _ in range(turns):
            actions, rewards = [], []
            for a in names:
                assert env.agent_selection == a
                action = choose(kind, env.observations[a]["action_mask"], rng)
                try:
                    env.step(action)
                except (ValueError, ZeroDivisionError) as err:
                    out["error"] = err
                    break
                actions.append(action)
                rewards.append([env.infos[a]["rewards"][c] for c in COMPONENTS])
            if out["error"] is not None:
                break
            out["action"].append(actions)
            out["reward"].append(rewards)
            snapshot()
    return {k: (np.asarray(v) if k != "error" else v) for k, v in out.items()}


def run_jaxgrid(grid: Path, actions: np.ndarray, **options) -> dict:
    """jaxgrid's gardeners on ``grid`` stepped through ``actions`` ``(turns, n)``."""
    env, params = make_gardeners(grid_file=str(grid), horizon=len(actions) + 1, **options)
    obs, state = env.reset(jax.random.PRNGKey(0), params)

    def turn(carry, xs):
        state = carry
        action, key = xs
        obs, state, _, _, _, info = env.step_env(key, state, action, params)
        return state, (obs, info, state.money, state.seeds, state.position)

    keys = jax.random.split(jax.random.PRNGKey(1), len(actions))
    _, (obs_t, info, money, seeds, position) = jax.jit(
        lambda s, a, k: jax.lax.scan(turn, s, (a, k))
    )(state, jnp.asarray(actions, jnp.int32), keys)
    stack = lambda first, rest: np.concatenate([np.asarray(first)[None], np.asarray(rest)])  # noqa: E731
    metrics = np.stack(
        [info["total_planted_flowers"], info["total_harvested_flowers"], info["avg_pollution"]]
        + [info["cells_pollution_above"][:, k] for k in range(4)],
        axis=1,
    )
    return {
        "obs": stack(obs["observation"], obs_t["observation"]),
        "mask": stack(obs["action_mask"], obs_t["action_mask"]),
        "reward": np.asarray(info["reward_vector"]),
        "total": np.asarray(info["reward_vector"]).mean(axis=-1),
        "money": stack(state.money, money),
        "seeds": stack(state.seeds, seeds),
        "position": stack(state.position, position),
        "metrics": np.asarray(metrics),
        "refused": np.asarray(info["action_refused"]),
    }


def compare(ours: dict, theirs: dict, atol: float = 1e-9) -> None:
    """Every observation, mask, reward component, metric and agent inventory, turn by turn
    (the first turn that differs is named)."""
    turns = len(theirs["action"])
    for key in ("mask", "position", "seeds", "money", "obs", "reward", "metrics"):
        a, b = np.asarray(ours[key])[: len(theirs[key])], np.asarray(theirs[key])
        assert a.shape == b.shape, f"{key}: shapes {a.shape} vs {b.shape}"
        tol = max(atol, 1e-6) if key == "obs" else atol  # the package's observations are float32
        close = np.isclose(a, b, rtol=tol, atol=tol) if a.dtype != bool else a == b
        bad = np.flatnonzero(~close.reshape(len(a), -1).all(axis=1))
        if len(bad):
            t = bad[0]
            raise AssertionError(
                f"{key} differs first at {'turn' if key in ('reward', 'metrics') else 'snapshot'} "
                f"{t} of {turns}: ours {a[t].ravel()[:12]} vs the package's {b[t].ravel()[:12]}"
            )
