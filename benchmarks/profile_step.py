"""Where an environment's step spends its kernel time, by the Python source that wrote it.

    python benchmarks/profile_step.py --env tso118-v0 [--envs N] [--steps S]
        [--warm W] [--policy NAME] [--lines K]

Compiles a jitted ``lax.scan`` of ``S`` steps of ``jax.vmap(env.step)`` over ``N``
environments (random actions, or the baseline ``NAME`` acting on each observation),
first stepped ``W`` steps into the day, runs it once under ``jax.profiler`` and adds up
each kernel's own time (its span less the kernels nested in it, on XLA's worker threads;
a thread's wait for another is left out). Each kernel is attributed through the compiled
program's stack frames (the HLO's ``stack_frame_id``, whose tables record the Python
frames that traced each operation: with jax 0.10 a few, often only the function's own)
to the outermost recorded frame in a jaxgrid file below the generic wrappers, and the
table gives ms a step by file and, under each, its ``K`` heaviest lines.

Why this and not the profiler's own views: they name XLA's fusions (``ynn_fusion.5``,
``clamp_multiply_fusion.2``), not the code, and a step of ``tso118-v0`` holds about a
thousand of them. Read it with two cautions. The profiler costs about a microsecond a
kernel, so code made of many small kernels (an interior point's iteration is about a
hundred) weighs more here than in wall time. And on a multi-core CPU XLA runs
independent kernels side by side, so kernel time is not wall time: work off the
critical path can cost little. Changes are still to be measured by alternating the
variants' runs in one process (``transmission_envs.py --paired``). ``jax.profiler``
keeps at most a million events; a run that fills it is reported, and fewer steps or
environments fit.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import re
import sys
import tempfile
import time
import warnings
from pathlib import Path

from env_throughput import draws, initial_carry, rollout

MAX_EVENTS = 1_000_000  # what jax.profiler keeps of a trace
TABLES = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")


def stack_frames(hlo: str):
    """``(frame of each instruction, frames)`` from a compiled HLO module's text:
    ``{instruction: frame id}`` and ``{frame id: (file, function, line, parent id)}``."""
    tables = {name: {} for name in TABLES}
    section, of_instruction = None, {}
    for line in hlo.splitlines():
        text = line.strip()
        if text in TABLES:
            section = text
            continue
        entry = re.match(r"^(\d+) (.*)$", text)
        if section and entry:
            tables[section][int(entry.group(1))] = entry.group(2)
            continue
        section = None
        op = re.match(r"^(?:ROOT )?%?([\w.\-]+) = .*stack_frame_id=(\d+)", text)
        if op:
            of_instruction[op.group(1)] = int(op.group(2))

    def fields(text):
        return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", text)}

    files = {i: t.strip('"') for i, t in tables["FileNames"].items()}
    functions = {i: t.strip('"') for i, t in tables["FunctionNames"].items()}
    frames = {}
    for i, text in tables["StackFrames"].items():
        frame = fields(text)
        where = fields(tables["FileLocations"][frame["file_location_id"]])
        frames[i] = (
            files[where["file_name_id"]],
            functions[where["function_name_id"]],
            where["line"],
            frame.get("parent_frame_id", 0),
        )
    return of_instruction, frames


def source(frame: int, frames) -> tuple[str, str, int] | None:
    """The outermost recorded ``(file, function, line)`` of ``frame``'s stack in a
    jaxgrid file other than the generic wrappers (``env.py``, ``masked.py``), else the
    innermost jaxgrid frame; ``None`` where no frame is jaxgrid's."""
    stack, seen = [], set()
    while frame in frames and frame not in seen:
        seen.add(frame)
        file, function, line, parent = frames[frame]
        if "/jaxgrid/" in file:
            stack.append((file.split("/jaxgrid/", 1)[1], function, line))
        frame = parent
    specific = [s for s in stack if s[0] not in ("env.py", "masked.py")]
    return (specific[-1] if specific else stack[0]) if stack else None


def kernel_times(trace_dir: Path) -> tuple[collections.Counter, int]:
    """Each kernel's own time (microseconds) on XLA's worker threads, and the events."""
    (path,) = Path(trace_dir).glob("**/*.trace.json.gz")
    events = json.load(gzip.open(path))["traceEvents"]
    threads = {
        (e["pid"], e["tid"]): e["args"]["name"]
        for e in events
        if e.get("ph") == "M" and e.get("name") == "thread_name"
    }
    spans = collections.defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and "dur" in e and "Eigen" in threads.get((e["pid"], e["tid"]), ""):
            spans[(e["pid"], e["tid"])].append(e)
    own = collections.Counter()
    for thread in spans.values():
        thread.sort(key=lambda e: (e["ts"], -e["dur"]))
        open_spans = []
        for e in thread:
            while open_spans and open_spans[-1]["ts"] + open_spans[-1]["dur"] <= e["ts"]:
                open_spans.pop()
            if open_spans:
                own[open_spans[-1]["name"]] -= e["dur"]
            own[e["name"]] += e["dur"]
            open_spans.append(e)
    return own, sum(e.get("ph") == "X" for e in events)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--env", required=True, help="a registered environment")
    parser.add_argument("--envs", type=int, default=256, help="environments (default 256)")
    parser.add_argument("--steps", type=int, default=8, help="steps profiled (default 8)")
    parser.add_argument("--warm", type=int, default=16, help="steps taken first (default 16)")
    parser.add_argument("--policy", default="random", help="a baseline of the env, or random")
    parser.add_argument("--lines", type=int, default=5, help="lines shown a file (default 5)")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    import jax

    import jaxgrid

    env, params = jaxgrid.make(args.env)
    baselines = env.baselines(params)
    if args.policy not in baselines:
        parser.error(f"--policy {args.policy}: {args.env}'s baselines are {sorted(baselines)}")
    policy = None if args.policy == "random" else baselines[args.policy]
    run = rollout(env, params, args.envs, policy=policy)
    carry = initial_carry(env, params, args.envs, policy)
    if args.warm:
        carry, _ = jax.jit(run)(
            carry, *draws(env, params, args.envs, args.warm)(jax.random.PRNGKey(1))
        )
    actions, keys = draws(env, params, args.envs, args.steps)(jax.random.PRNGKey(2))
    compiled = jax.jit(run).lower(carry, actions, keys).compile()
    jax.block_until_ready(compiled(carry, actions, keys))
    start = time.perf_counter()
    jax.block_until_ready(compiled(carry, actions, keys))
    wall_ms = (time.perf_counter() - start) / args.steps * 1e3
    with tempfile.TemporaryDirectory() as trace_dir:
        jax.profiler.start_trace(trace_dir)
        jax.block_until_ready(compiled(carry, actions, keys))
        jax.profiler.stop_trace()
        own, n_events = kernel_times(Path(trace_dir))
    of_instruction, frames = stack_frames(compiled.as_text())

    by_file, by_line = collections.Counter(), collections.defaultdict(collections.Counter)
    for kernel, micros in own.items():
        where = source(of_instruction[kernel], frames) if kernel in of_instruction else None
        file = where[0] if where else "(XLA: loops, calls, unattributed kernels)"
        by_file[file] += micros
        if where:
            by_line[file][f"{where[0]}:{where[2]} {where[1]}"] += micros
    total = sum(by_file.values())
    print(
        f"`{args.env}`, {args.envs} environments, {args.steps} steps after {args.warm} "
        f"({args.policy} actions): wall {wall_ms:.2f} ms a step; kernel time "
        f"{total / args.steps / 1e3:.2f} ms a step on XLA's threads; {n_events} events, "
        f"{n_events / args.steps:.0f} a step (at about a microsecond each, the profiler's "
        "own share)"
        + (" (the profiler's limit: later kernels are missing)" if n_events >= MAX_EVENTS else "")
    )
    print()
    print("| ms a step | share | where |")
    print("|---|---|---|")
    for file, micros in by_file.most_common():
        print(f"| {micros / args.steps / 1e3:.3f} | {100 * micros / total:.1f} % | {file} |")
        for line, m in by_line[file].most_common(args.lines):
            print(f"| {m / args.steps / 1e3:.3f} | | &nbsp;&nbsp;{line} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
