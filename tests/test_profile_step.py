"""``benchmarks/profile_step.py`` maps compiled kernels back to the jaxgrid source that
traced them."""

import sys
from pathlib import Path

import jax
from jax.experimental.compilation_cache.compilation_cache import reset_cache

import jaxgrid

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from profile_step import source, stack_frames  # noqa: E402


def test_kernels_are_attributed_to_the_environment_that_traced_them():
    env, params = jaxgrid.make("arbitrage-v0")
    obs, state = jax.vmap(env.reset, (0, None))(jax.random.split(jax.random.PRNGKey(0), 4), params)
    action = jax.vmap(env.action_space(params).sample)(jax.random.split(jax.random.PRNGKey(1), 4))
    keys = jax.random.split(jax.random.PRNGKey(2), 4)
    step = jax.jit(jax.vmap(env.step, in_axes=(0, 0, 0, None)))
    # compiled afresh: the persistent cache's key leaves out source locations, so a cached
    # program carries the line numbers of the source it was first compiled from. JAX
    # decides once a process whether it uses the cache (the reset above compiled
    # already), so the switch only holds after ``reset_cache``: without it this test
    # read a program cached before a function moved down its file
    cached = jax.config.jax_enable_compilation_cache
    jax.config.update("jax_enable_compilation_cache", False)
    reset_cache()
    try:
        hlo = step.lower(keys, state, action, params).compile().as_text()
    finally:
        jax.config.update("jax_enable_compilation_cache", cached)
        reset_cache()
    of_instruction, frames = stack_frames(hlo)
    places = {where for f in of_instruction.values() if (where := source(f, frames))}
    # the battery's own step is traced in its env file
    assert "envs/arbitrage/env.py" in {file for file, _, _ in places}
    # each place is a line of its file inside the function named for it
    package = Path(jaxgrid.__file__).parent
    for file, function, line in places:
        text = (package / file).read_text().splitlines()
        assert 1 <= line <= len(text), (file, line)
        name = [part for part in function.split(".") if not part.startswith("<")][-1]
        assert any(f"def {name}(" in row for row in text[:line]), (file, function, line)
