"""``check_env`` with its defaults (1000 steps, 64 environments; the unit-commitment
environments two episodes in four) on every registered environment: the contract test
of each one. The default suite checks one environment of each family (a battery, the
grid world, the prosumers, a feeder under MARL; unit commitment's tso14-v0 took 105 s, and
tests/envs/test_tso.py steps it); ``JAXGRID_VALIDATE=full`` checks every one, the case118
and case300 ones included.

The per-environment test files call ``check_env`` only on variants the registry does not
hold (another solver, every objective), at smaller sizes. Each call here takes 10-60 s on
a 2-core CPU, mostly compiling (float32 rollouts, float64 rollout and its ``vmap``);
environments of equal shapes share programs through the persistent compilation cache.
"""

import pytest
from conftest import sampled

import jaxgrid
from jaxgrid.testing import check_env

# environments whose step solves an optimisation (a DC-OPF every step: about 100
# env-steps/s here on case118, gencos5-v0's market 37 s at the defaults) run two episodes
# in four environments instead (the case300 ones' check_env ran over 25 minutes here at
# the defaults); so too opf118-v0 (an AC power flow of 118 buses a step, about 20 s at the
# smaller sizes; opf14-v0 is the same code); evfleet33-v0 (64 agents over a DistFlow feeder: about 2 minutes at the defaults
# here, mostly compiling, where two episodes in four environments see the same); and
# voltage13-v0 and voltage123-v0 (an unbalanced power flow of 41 or 278 nodes, 40
# fixed-point iterations a step: voltage13's defaults took about 8 minutes here)
SMALLER = {"num_steps": 96, "num_envs": 4}
SLOW = ("tso", "opf118", "gencos", "evfleet", "voltage13", "voltage123")
# one environment of each family: a check_env takes 25-120 s on a cold 2-core machine
SAMPLE = ("arbitrage-v0", "gardeners-v0", "smartgrid-v0", "voltage33-v0")
# scenario variants: the same class and code as a sibling, other data or sizes.
# Each variant: its sibling.
VARIANTS = {
    "ders141-v0": "ders33-v0",
    "voltage69-v0": "voltage33-v0",
    "voltage141-v0": "voltage33-v0",
    "smartgrid-daily-v0": "smartgrid-v0",
    "smartgrid-generous-v0": "smartgrid-v0",
    "smartgrid-medium-v0": "smartgrid-v0",
    "smartgrid-scarce-v0": "smartgrid-v0",
}


@pytest.mark.parametrize("variant, sibling", VARIANTS.items())
def test_each_variant_is_its_siblings_class(variant, sibling):
    assert sibling in jaxgrid.list_envs() and sibling not in VARIANTS
    assert type(jaxgrid.make(variant)[0]) is type(jaxgrid.make(sibling)[0])


@pytest.mark.parametrize("name", sampled(jaxgrid.list_envs(), keep=SAMPLE))
def test_check_env_with_its_defaults(name):
    env, params = jaxgrid.make(name)
    check_env(env, params, **(SMALLER if name.startswith(SLOW) else {}))
