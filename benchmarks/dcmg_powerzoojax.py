"""``dcmg-v0`` against PowerZooJax's data-centre microgrid, side by side in one run.

    python benchmarks/dcmg_powerzoojax.py --powerzoojax PATH [--batches 1 64 256 1024]
        [--steps 288] [--repeats 5] [--out FILE]

``PATH`` is a checkout of github.com/powerzoojax/PowerZooJax (its ``powerzoojax`` package
is imported from there). Both environments are stepped as users write it,
``jax.vmap(env.step)`` in a jitted ``lax.scan`` over one day (288 five-minute steps), with
uniform random actions and step keys drawn before each timed run and every observation
and reward consumed (:func:`env_throughput.measure_env`, the same code for both). Both
reset themselves inside ``step`` when a day ends. PowerZooJax runs its task's default
configuration, ``DataCenterMicrogridEnv`` with ``make_dcmicrogrid_params_with_profiles``
(Google workload, GB solar and prices, 5-dimensional action, 24 observations); jaxgrid
runs ``dcmg-v0`` as registered. Median of ``--repeats`` timed days after compilation; on a
CPU the batch is split over one XLA host device per core, for both.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from env_throughput import _setup_devices, measure_env  # noqa: E402


def _powerzoojax_env(path: str):
    if path not in sys.path:
        sys.path.insert(0, path)
    from powerzoojax.envs.microgrid import (
        DataCenterMicrogridEnv,
        make_dcmicrogrid_params_with_profiles,
    )

    return DataCenterMicrogridEnv(), make_dcmicrogrid_params_with_profiles(source="google")


def rows(path: str, batches, steps: int, repeats: int) -> list[tuple]:
    """``(batch, jaxgrid env-steps/s, PowerZooJax env-steps/s, jaxgrid compile s, PowerZooJax
    compile s)`` per batch size."""
    import jaxgrid

    env, params = jaxgrid.make("dcmg-v0")
    peer_env, peer_params = _powerzoojax_env(path)
    out = []
    for batch in batches:
        ours, ours_compile = measure_env(env, params, batch, steps, repeats)
        theirs, theirs_compile = measure_env(peer_env, peer_params, batch, steps, repeats)
        out.append((batch, ours, theirs, ours_compile, theirs_compile))
        print(f"{batch:5d} envs: jaxgrid {ours:.3g}, PowerZooJax {theirs:.3g}", file=sys.stderr)
    return out


def table(results, steps: int, repeats: int) -> str:
    import jax

    devices = jax.devices()
    lines = [
        f"dcmg env-steps/s on {devices[0].platform} ({len(devices)} XLA devices), "
        f"`jax.vmap(env.step)` over {steps}-step days, median of {repeats} runs.",
        "",
        "| envs | jaxgrid dcmg-v0 | PowerZooJax DCMG | x peer | compile s (jaxgrid / peer) |",
        "|---|---|---|---|---|",
    ]
    for batch, ours, theirs, c_ours, c_theirs in results:
        lines.append(
            f"| {batch} | {ours:.3g} | {theirs:.3g} | {ours / theirs:.1f} "
            f"| {c_ours:.1f} / {c_theirs:.1f} |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--powerzoojax", required=True, help="PowerZooJax checkout")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 64, 256, 1024])
    parser.add_argument("--steps", type=int, default=288)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    _setup_devices()
    text = table(
        rows(args.powerzoojax, args.batches, args.steps, args.repeats), args.steps, args.repeats
    )
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
