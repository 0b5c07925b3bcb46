"""gardeners-v0 throughput against the real ethical-gardeners, side by side in one run.

    python benchmarks/gardeners_throughput.py [--quick] [--out FILE]

The peer: ethical-gardeners 0.0.1's packaged configuration (random 10 x 10 grid with 20 %
obstacles, 2 agents, partial observation of radius 1, random seed returns, no rendering,
no metric export), one environment stepped in Python agent by agent with uniform random
actions drawn beforehand (its warnings about refused actions silenced); a full turn (one
action per agent) is one env-step. jaxgrid: ``gardeners-v0`` (the same scenario; one step
is a full turn) timed by ``env_throughput.measure``: ``jax.vmap(env.step)`` in a jitted
``lax.scan`` at 1, 256 and 4096 environments, actions and keys drawn before each timed
run, every observation, mask and reward consumed, median of repeated runs after
compilation, the batch split over one XLA host device per core.
"""

from __future__ import annotations

import contextlib
import io
import sys
import time
import warnings

from env_throughput import measure
from peer_table import side_by_side


def peer_rate(turns: int) -> float:
    """Env-steps (full turns) per second of the package's default configuration."""
    import numpy as np
    from omegaconf import OmegaConf

    with contextlib.redirect_stdout(io.StringIO()):  # hydra announces its config path
        from ethicalgardeners import make_env

    config = OmegaConf.create(
        {
            "random_seed": 42,
            "num_iterations": 10**9,
            "render_mode": "none",
            "grid": {"init_method": "random", "num_seeds_returned": -3, "nb_agent": 2},
            "observation": {"type": "partial", "range": 1},
            "metrics": {"export_on": False, "send_on": False},
            "renderer": {"graphical": {"enabled": False}, "console": {"enabled": False}},
        }
    )
    env = make_env(config)
    env.reset(seed=0)
    n = len(env.possible_agents)
    actions = np.random.default_rng(0).integers(0, env.action_space("agent_0").n, (turns, n))
    rates = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(3):
            t0 = time.perf_counter()
            for turn in actions:
                for a in turn:
                    env.step(int(a))
            rates.append(turns / (time.perf_counter() - t0))
    return float(np.median(rates))


def main(argv=None) -> int:
    return side_by_side(
        argv,
        __doc__,
        ("ethical-gardeners 0.0.1 (Python, AEC)", peer_rate),
        (
            "jaxgrid gardeners-v0 (jit + vmap)",
            lambda n, steps, repeats: measure("gardeners-v0", {}, n, steps, repeats),
        ),
        ((1, 2000), (256, 500), (4096, 100)),
        "gardeners env-steps/s (one turn of 2 agents = 2 agent-steps)",
        2,
    )


if __name__ == "__main__":
    sys.exit(main())
