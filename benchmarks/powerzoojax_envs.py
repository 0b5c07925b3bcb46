"""jaxgrid's environments against PowerZooJax's on the same task, side by side in one run.

    python benchmarks/powerzoojax_envs.py --powerzoojax PATH --task {dcmg,ders141,dso,ieee123}
        [--batches 1 64 256 1024] [--steps N] [--repeats 5] [--out FILE]

``PATH`` is a checkout of github.com/powerzoojax/PowerZooJax (its ``powerzoojax`` package
is imported from there). Every environment is stepped as users write it,
``jax.vmap(env.step)`` in a jitted ``lax.scan``, with uniform random actions and step keys
drawn before each timed run and every observation and reward consumed
(:func:`env_throughput.measure_env`, the same code for all); all reset themselves inside
``step`` when an episode ends. Median of ``--repeats`` timed runs after compilation; on a
CPU the batch is split over one XLA host device per core, for all. Run ``ieee123`` on one device
(``XLA_FLAGS=--xla_force_host_platform_device_count=1``): split over two host devices,
``voltage123-v0``'s scan at 64 environments never returns (every thread idle; not yet
diagnosed, see docs/benchmarks.md).

Tasks:

- ``dcmg``: ``dcmg-v0`` against PowerZooJax's ``DataCenterMicrogridEnv`` with its task's
  default profiles (``make_dcmicrogrid_params_with_profiles``: Google workload, GB prices;
  5 actions, 24 observations), over one day of 288 five-minute steps.
- ``ders141``: ``ders141-v0`` (12 agents: 4 batteries, 4 PV inverters, 4 flexible loads on
  case141, DistFlow) against PowerZooJax's DERs task as its IPPO trains on it
  (``tasks.ders.make_ders_marl_env``: the same 12 devices on case141, local
  observations, its DistFlow sweep), 48 half-hour steps. PowerZooJax's multi-agent
  environments take JaxMARL's per-agent dicts and no params argument; a thin adapter
  (:class:`MarlAsGymnax`) stacks the agents' actions into the dict its ``step`` reads
  and passes its own observation and reward dicts through, so the peer's work is
  untouched.
- ``dso``: ``dso33-v0`` (one operator, 6 flexible loads on case33bw, DistFlow) against
  PowerZooJax's ``DistGridEnv`` with its DSO task's parameters (``tasks.dso.make_dso_params``:
  the same six flexible loads on case33bw, its backward/forward sweep iterated to its
  tolerance in a ``while_loop``, its auto-reset computed at every step), 48 half-hour
  steps. The peer's Ausgrid load shapes are not in its repository's snapshot, so its
  synthetic diurnal shapes stand in (the load changes the sweep's iterations, not its work
  per iteration).
- ``ieee123``: ``voltage123-v0`` (16 PV inverters) and ``voltage123-reg-v0`` (7 regulator
  agents), each env-step one port Z-bus power flow at its fixed 10 float32 iterations
  with OpenDSS's coupled impedance matrices, against PowerZooJax's ``DistGrid3PhaseEnv``
  with the parameters of its DERs 3-phase task (``tasks.ders.make_ders_3phase_eval``:
  case123, 6 batteries, a per-phase injection at every bus), its backward/forward sweep
  iterated to its tolerance in a ``while_loop`` (under ``vmap`` every environment runs
  until the last has converged) on balanced diagonal impedances; 48 steps, its day.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from env_throughput import _setup_devices, measure_env  # noqa: E402


def _dcmg_peer():
    from powerzoojax.envs.microgrid import (
        DataCenterMicrogridEnv,
        make_dcmicrogrid_params_with_profiles,
    )

    return DataCenterMicrogridEnv(), make_dcmicrogrid_params_with_profiles(source="google")


def _ieee123_peer():
    from powerzoojax.envs.grid.dist_3phase import DistGrid3PhaseEnv
    from powerzoojax.tasks.ders import make_ders_3phase_eval

    _, params = make_ders_3phase_eval()
    return DistGrid3PhaseEnv(), params


class MarlAsGymnax:
    """A PowerZooJax multi-agent environment (JaxMARL's ``reset(key)``, ``step(key,
    state, actions_dict)``) behind gymnax's signatures, actions stacked ``(agents,
    act_dim)``: what :func:`env_throughput.measure_env` steps."""

    def __init__(self, env):
        self.env = env

    def reset(self, key, params):
        return self.env.reset(key)

    def step(self, key, state, action, params):
        names = self.env.agent_names
        return self.env.step(key, state, {n: action[i] for i, n in enumerate(names)})

    def action_space(self, params):
        one = self.env.action_space()
        return Box(one.low, one.high, (self.env.num_agents, *one.shape))


class Box:
    """Uniform actions in ``[low, high]`` for every agent."""

    def __init__(self, low, high, shape):
        self.low, self.high, self.shape = low, high, shape

    def sample(self, key):
        import jax

        return jax.random.uniform(key, self.shape, minval=self.low, maxval=self.high)


def _dso_peer():
    from powerzoojax.envs.grid.dist import DistGridEnv
    from powerzoojax.tasks.dso import make_dso_params

    return DistGridEnv(), make_dso_params()


def _ders141_peer():
    from powerzoojax.tasks.ders import make_ders_marl_env

    env, params = make_ders_marl_env()
    return MarlAsGymnax(env), params


# task: (jaxgrid environments, (peer's name, its (env, params) factory), steps per run)
TASKS = {
    "dcmg": (("dcmg-v0",), ("PowerZooJax DCMG", _dcmg_peer), 288),
    "ders141": (("ders141-v0",), ("PowerZooJax DERs (IPPO env)", _ders141_peer), 48),
    "dso": (("dso33-v0",), ("PowerZooJax DSO (DistGridEnv)", _dso_peer), 48),
    "ieee123": (
        ("voltage123-v0", "voltage123-reg-v0"),
        ("PowerZooJax DistGrid3PhaseEnv", _ieee123_peer),
        48,
    ),
}


def rows(path: str, task: str, batches, steps: int, repeats: int) -> list[tuple]:
    """``(batch, {name: (env-steps/s, compile s)})`` per batch size, the peer last."""
    import jaxgrid

    if path not in sys.path:
        sys.path.insert(0, path)
    ours, (peer_name, peer), _ = TASKS[task]
    envs = {name: jaxgrid.make(name) for name in ours}
    envs[peer_name] = peer()
    out = []
    for batch in batches:
        rates = {
            name: measure_env(env, params, batch, steps, repeats)
            for name, (env, params) in envs.items()
        }
        out.append((batch, rates))
        print(batch, {k: f"{v[0]:.3g}" for k, v in rates.items()}, file=sys.stderr)
    return out


def table(results, steps: int, repeats: int) -> str:
    """The markdown table of :func:`rows`: env-steps/s (compile s) and each of jaxgrid's
    environments as a multiple of the peer."""
    import jax

    devices = jax.devices()
    names = list(results[0][1])
    ours, peer = names[:-1], names[-1]
    lines = [
        f"env-steps/s on {devices[0].platform} ({len(devices)} XLA devices), "
        f"`jax.vmap(env.step)` over {steps} steps, median of {repeats} runs "
        "(compile s in brackets).",
        "",
        "| envs | " + " | ".join(names) + " | " + " | ".join(f"{n} / peer" for n in ours) + " |",
        "|---" * (1 + len(names) + len(ours)) + "|",
    ]
    for batch, rates in results:
        cells = [f"{rates[n][0]:.3g} ({rates[n][1]:.1f})" for n in names]
        ratios = [f"{rates[n][0] / rates[peer][0]:.1f}" for n in ours]
        lines.append(f"| {batch} | " + " | ".join(cells + ratios) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--powerzoojax", required=True, help="PowerZooJax checkout")
    parser.add_argument("--task", required=True, choices=sorted(TASKS))
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 64, 256, 1024])
    parser.add_argument("--steps", type=int, help="steps per timed run (default: a day)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    _setup_devices()
    steps = args.steps or TASKS[args.task][2]
    results = rows(
        str(Path(args.powerzoojax).resolve()), args.task, args.batches, steps, args.repeats
    )
    text = table(results, steps, args.repeats)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
