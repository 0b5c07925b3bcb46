"""``check_env`` with its defaults (1000 steps, 64 environments; the unit-commitment
environments two episodes in four) on every registered environment: the contract test
of each one (scenario variants of a class checked here, and the case118 ones, under
``JAXGRID_VALIDATE=full``).

The per-environment test files call ``check_env`` only on variants the registry does not
hold (another solver, every objective), at smaller sizes. Each call here takes 10-60 s on
a 2-core CPU, mostly compiling (float32 rollouts, float64 rollout and its ``vmap``);
environments of equal shapes share programs through the persistent compilation cache.
"""

import os

import pytest

import jaxgrid
from jaxgrid.testing import check_env

FULL = os.environ.get("JAXGRID_VALIDATE") == "full"

# environments whose step solves an optimisation (a DC-OPF every step: about 100
# env-steps/s here on case118, gencos5-v0's market 37 s at the defaults) run two episodes
# in four environments instead; on case118 its
# programs take minutes to compile, so the default suite checks the case14 variants
# (the same code) and JAXGRID_VALIDATE=full the case118 and case300 ones too (the
# case300 ones' check_env ran over 25 minutes here); so too opf118-v0 (an
# AC power flow of 118 buses a step, about 20 s at the smaller sizes; opf14-v0 is the same
# code); evfleet33-v0 (64 agents over a DistFlow feeder: about 2 minutes at the defaults
# here, mostly compiling, where two episodes in four environments see the same); and
# voltage13-v0 and voltage123-v0 (an unbalanced power flow of 41 or 278 nodes, 40
# fixed-point iterations a step: voltage13's defaults took about 8 minutes here)
SMALLER = {"num_steps": 96, "num_envs": 4}
SLOW = ("tso", "opf118", "gencos", "evfleet", "voltage13", "voltage123")
# scenario variants: the same class and code as a sibling checked by default, other data
# or sizes; their checks took 410 of the suite's ~5400 worker-seconds on a cold 2-core
# machine, so they run under JAXGRID_VALIDATE=full. Each variant: its sibling.
VARIANTS = {
    "ders141-v0": "ders33-v0",
    "voltage69-v0": "voltage33-v0",
    "voltage141-v0": "voltage33-v0",
    "smartgrid-daily-v0": "smartgrid-v0",
    "smartgrid-generous-v0": "smartgrid-v0",
    "smartgrid-medium-v0": "smartgrid-v0",
    "smartgrid-scarce-v0": "smartgrid-v0",
}
CHECKED = [
    n
    for n in jaxgrid.list_envs()
    if FULL or not (n.startswith(("tso118", "tso300", "opf118")) or n in VARIANTS)
]


@pytest.mark.parametrize("variant, sibling", VARIANTS.items())
def test_each_variant_is_its_checked_siblings_class(variant, sibling):
    assert sibling in CHECKED
    assert type(jaxgrid.make(variant)[0]) is type(jaxgrid.make(sibling)[0])


@pytest.mark.parametrize("name", CHECKED)
def test_check_env_with_its_defaults(name):
    env, params = jaxgrid.make(name)
    check_env(env, params, **(SMALLER if name.startswith(SLOW) else {}))
