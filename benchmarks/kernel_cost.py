"""What one kernel of a program costs XLA's CPU compiler, and the steps' kernels at that cost.

    python benchmarks/kernel_cost.py [--kernels N ...] [--repeats N] [--envs NAME ...] [--out FILE]

A program of ``N`` independent one-multiply kernels (``N`` outputs, each a row of one
input times its own constant: XLA's CPU compiler fuses none of them together) is traced,
lowered and compiled ahead of time for each ``--kernels`` size, ``--repeats`` times in
one process (JAX's persistent cache off, its caches cleared before each); the slope of
the median compile seconds against ``N`` (least squares) is what one kernel costs, the
intercept what a program costs besides. Each of ``--envs``' steps
(``jax.jit(jax.vmap(env.step))`` at 1024 environments, as ``compile_time.py`` measures
it) is then given beside its kernels times that slope: how much of its compile the
number of its kernels alone explains, however little each computes.

"Kernels" are those XLA generated code for, counted in a second, fresh process that
dumps them (``--xla_dump_to``; the dump is not timed): XLA's CPU compiler generates one
kernel for identical fusions, so a program's fusions (``compile_time.py``'s count) can
be many more than its kernels.
"""

from __future__ import annotations

import argparse
import glob
import os
import statistics
import subprocess
import sys
import tempfile
import warnings

from timing import add_row, ahead_of_time, emit_table

PROGRAM = "measured"  # the name XLA dumps the measured program under


def independent_kernels(n: int):
    """``(fn, arg)``: ``fn(arg)`` returns ``n`` arrays, row ``i`` of ``arg`` ``(n, 22)``
    times ``i + 1``, which XLA compiles as ``n`` kernels."""
    import jax
    import jax.numpy as jnp

    def fn(x):
        return [x[i] * (i + 1.0) for i in range(n)]

    return fn, jax.ShapeDtypeStruct((n, 22), jnp.float32)


def compile_seconds(n: int) -> tuple[float, int]:
    """``(compile s, fusions)`` of :func:`independent_kernels` ``(n)``, ahead of time."""
    import jax

    jax.clear_caches()
    fn, arg = independent_kernels(n)
    _, compile_s, program = ahead_of_time(fn, arg)
    return compile_s, program.as_text().count(" fusion(")


def count_kernels(program: str) -> int:
    """Kernels XLA generates code for in ``program`` (``"step NAME"`` or ``"N"``
    independent kernels), counted from their dumped LLVM modules in a fresh process."""
    with tempfile.TemporaryDirectory() as dump:
        flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_dump_to={dump}".strip()
        subprocess.run(
            [sys.executable, __file__, "--dump", program],
            env={**os.environ, "XLA_FLAGS": flags},
            capture_output=True,
            check=True,
        )
        return len(glob.glob(os.path.join(dump, f"*.jit_{PROGRAM}.*ir-with-opt.ll")))


def dump(program: str) -> None:
    """Compile ``program`` (see :func:`count_kernels`) as a function named ``PROGRAM``."""
    import jax

    if program.startswith("step "):
        from compile_time import batched_step

        import jaxgrid

        env, params = jaxgrid.make(program.split()[1])
        fn, *args = batched_step(env, params, jax.random.split(jax.random.PRNGKey(0), 1024))
    else:
        fn, arg = independent_kernels(int(program))
        args = (arg,)

    def measured(*args):
        return fn(*args)

    measured.__name__ = PROGRAM  # what count_kernels looks for in the dump
    jax.jit(measured).trace(*args).lower().compile()


def fit_line(xs, ys) -> tuple[float, float]:
    """``(slope, intercept)`` of the least-squares line through ``(xs, ys)``."""
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mean_x) ** 2 for x in xs)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / sxx
    return slope, mean_y - slope * mean_x


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--kernels", nargs="*", type=int, default=[100, 200, 400])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--envs", nargs="*", default=["tso14-v0", "tso14-continuous-v0"])
    parser.add_argument("--out", help="also write the table to this markdown file")
    parser.add_argument("--dump", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.dump:
        dump(args.dump)
        return 0
    if len(set(args.kernels)) < 2:
        parser.error("--kernels needs at least two different sizes to fit a line")
    warnings.simplefilter("ignore")
    import jax

    jax.config.update("jax_enable_compilation_cache", False)
    lines = [
        f"Seconds to compile on {jax.devices()[0].device_kind} ({os.cpu_count()} cores), one "
        f"XLA device, ahead of time: independent one-multiply kernels (median of "
        f"{args.repeats}), then the steps at 1024 environments (one run each).",
        "",
        "| program | fusions | kernels | compile s | kernels x ms a kernel, s |",
        "|---|---|---|---|---|",
    ]
    rows = []
    for n in args.kernels:
        runs = [compile_seconds(n) for _ in range(args.repeats)]
        kernels = count_kernels(str(n))
        rows.append(
            (
                f"{n} one-multiply kernels",
                runs[0][1],
                kernels,
                statistics.median(s for s, _ in runs),
            )
        )
    slope, intercept = fit_line([r[2] for r in rows], [r[3] for r in rows])
    from compile_time import measure

    for name in args.envs:
        r = measure(name, 1024)
        rows.append(
            (f"`{name}` step", r["fusions"], count_kernels(f"step {name}"), r["step_compile"])
        )
    for what, fusions, kernels, seconds in rows:
        add_row(
            lines,
            f"| {what} | {fusions} | {kernels} | {seconds:.2f} | {kernels * slope:.2f} |",
        )
    lines += ["", f"{1e3 * slope:.1f} ms a kernel, {intercept:.2f} s besides (least squares)."]
    print(lines[-1])
    emit_table(lines, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
