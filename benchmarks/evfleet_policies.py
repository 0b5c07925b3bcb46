"""``evfleet33-v0``'s baselines beside its perfect-foresight LP plan on held-out days.

``python benchmarks/evfleet_policies.py [DAYS]`` (default 16 days, drawn from the
held-out days by keys split from ``PRNGKey(0)``) prints a markdown table of the mean per
day: return (per agent, the default weighted reward), the fleet's energy bill
(currency), unmet departure energy (MWh, summed over vehicles), and the voltage-band
(pu, summed over buses and steps) and transformer (MVA above the rating, summed over
steps) costs. The table is in ``docs/environments/evfleet.md``.
"""

import sys

import jax
import jax.numpy as jnp
import numpy as np

import jaxgrid
from jaxgrid.envs.evfleet import day_plan
from jaxgrid.envs.evfleet.oracle import plan_actions, rollout_plan

env, params = jaxgrid.make("evfleet33-v0")
params = params.replace(profiles=params.profiles.for_testing())  # held-out days
days = int(sys.argv[1]) if len(sys.argv) > 1 else 16
keys = jax.random.split(jax.random.PRNGKey(0), days)


def summary(reward, info):
    """Return per agent, fleet bill, unmet MWh, voltage and transformer costs of a day."""
    costs = info["costs"]
    return np.array(
        [
            float(jnp.sum(reward)) / env.num_agents,
            -float(jnp.sum(info["reward_vector"][:, 0, 0])),
            float(jnp.sum(costs[:, :, 0])),
            float(jnp.sum(costs[:, 0, 1])),
            float(jnp.sum(costs[:, 0, 2])),
        ]
    )


rows = {}
for name, policy in env.baselines(params).items():
    run = jax.jit(lambda k, p=policy: jaxgrid.rollout(env, params, p, k, env.horizon))
    rows[name] = np.mean([summary(t.reward, t.info) for t in map(run, keys)], axis=0)
run_plan = jax.jit(rollout_plan, static_argnums=0)
oracle = []
for k in keys:
    _, state = env.reset(jax.random.split(k)[0], params)
    reward, _, info = run_plan(
        env, params, state, plan_actions(day_plan(env, params, state), params)
    )
    oracle.append(summary(reward, info))
rows["oracle (LP plan)"] = np.mean(oracle, axis=0)
print("| policy | return | fleet bill | unmet MWh | voltage_band | transformer |")
print("|---|---|---|---|---|---|")
for name, r in rows.items():
    print(f"| {name} | {r[0]:.2f} | {r[1]:.1f} | {r[2]:.3f} | {r[3]:.3f} | {r[4]:.2f} |")
