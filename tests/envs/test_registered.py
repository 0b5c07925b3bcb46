"""``check_env`` with its defaults (1000 steps, 64 environments) on every registered
environment: the contract test of each one.

The per-environment test files call ``check_env`` only on variants the registry does not
hold (another solver, every objective), at smaller sizes. Each call here takes 10-60 s on
a 2-core CPU, mostly compiling (float32 rollouts, float64 rollout and its ``vmap``);
environments of equal shapes share programs through the persistent compilation cache.
"""

import pytest

import jaxgrid
from jaxgrid.testing import check_env


@pytest.mark.parametrize("name", jaxgrid.list_envs())
def test_check_env_with_its_defaults(name):
    env, params = jaxgrid.make(name)
    check_env(env, params)
