"""gardeners-v0 throughput against the real ethical-gardeners, side by side in one run.

    python benchmarks/gardeners_throughput.py [--quick] [--out FILE]

The peer: ethical-gardeners 0.0.1's packaged configuration (random 10 x 10 grid with 20 %
obstacles, 2 agents, partial observation of radius 1, random seed returns, no rendering,
no metric export), one environment stepped in Python agent by agent with uniform random
actions drawn beforehand (its warnings about refused actions silenced); a full turn (one
action per agent) is one env-step. jaxgrid: ``gardeners-v0`` (the same scenario; one step
is a full turn) timed by ``env_throughput.measure``: ``env.step_batch`` in a jitted
``lax.scan`` at 1, 256 and 4096 environments, actions and keys drawn before each timed
run, every observation, mask and reward consumed, median of repeated runs after
compilation, the batch split over one XLA host device per core.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import time
import warnings

from env_throughput import _setup_devices, measure
from peer_table import peer_table


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
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", help="also write the table to this markdown file")
    args = parser.parse_args(argv)
    _setup_devices()
    warnings.simplefilter("ignore")

    peer = peer_rate(100 if args.quick else 500)
    rows = [("ethical-gardeners 0.0.1 (Python, AEC)", 1, peer, None)]
    for num_envs, steps in ((1, 2000), (256, 500), (4096, 100)):
        steps = steps // 5 if args.quick else steps
        rate, compile_s = measure("gardeners-v0", {}, num_envs, steps, 3 if args.quick else 7)
        rows.append(("jaxgrid gardeners-v0 (jit + vmap)", num_envs, rate, compile_s))
    peer_table(
        "gardeners env-steps/s (one turn of 2 agents = 2 agent-steps)", rows, 2, peer, args.out
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
