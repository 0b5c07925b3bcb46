import csv

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import full_only

import jaxgrid

KEY = jax.random.PRNGKey(0)


def _voltage_run(steps=100):
    env, params = jaxgrid.make("voltage33-v0")
    # agent i always asks for q = (i - 2.5) / 3: a mix-up of agents shows in the columns
    fixed = (jnp.arange(6.0)[:, None] - 2.5) / 3

    def policy(key, obs):
        return fixed

    return env, jax.jit(lambda k: jaxgrid.rollout(env, params, policy, k, steps))(KEY)


def test_columns_name_every_variable_per_agent_and_bus():
    env, traj = _voltage_run()
    cols = jaxgrid.trajectory_columns(env, traj)
    agent = env.agents[4]
    np.testing.assert_array_equal(
        cols[f"action[{agent}][q_share]"], np.full(100, (4 - 2.5) / 3, np.float32)
    )
    np.testing.assert_array_equal(cols["vm_pu[17]"], np.asarray(traj.info["vm_pu"])[:, 17])
    np.testing.assert_array_equal(cols[f"q_mvar[{agent}]"], np.asarray(traj.info["q_mvar"])[:, 4])
    for k, name in enumerate(env.objective_names):
        np.testing.assert_array_equal(
            cols[f"objective.{name}[{agent}]"], np.asarray(traj.info["reward_vector"])[:, 4, k]
        )
    np.testing.assert_array_equal(cols[f"reward[{agent}]"], np.asarray(traj.reward)[:, 4])
    # voltage33 episodes last 96 steps: steps 96.. belong to the second episode
    np.testing.assert_array_equal(cols["episode"], (np.arange(100) >= 96).astype(int))
    assert all(len(c) == 100 for c in cols.values())


def test_csv_and_parquet_hold_the_same_table(tmp_path):
    env, traj = _voltage_run(20)
    cols = jaxgrid.trajectory_columns(env, traj)
    path = jaxgrid.export_trajectory(env, traj, tmp_path / "run.csv")
    with path.open() as f:
        rows = list(csv.reader(f))
    assert rows[0] == list(cols)
    assert len(rows) == 21
    i = rows[0].index("vm_pu[17]")
    np.testing.assert_allclose([float(r[i]) for r in rows[1:]], cols["vm_pu[17]"], rtol=1e-6)
    pq = pytest.importorskip("pyarrow.parquet")
    table = pq.read_table(jaxgrid.export_trajectory(env, traj, tmp_path / "run.parquet"))
    assert table.column_names == list(cols)
    np.testing.assert_array_equal(table.column("vm_pu[17]").to_numpy(), cols["vm_pu[17]"])


@full_only
def test_named_action_components_and_clear_errors(tmp_path):
    env, params = jaxgrid.make("smartgrid-v0")
    traj = jaxgrid.rollout(env, params, lambda k, o: jnp.zeros((26, 6)), KEY, 3)
    cols = jaxgrid.trajectory_columns(env, traj)
    assert "action[School1][buy_energy]" in cols and "payoff[Household3]" in cols
    assert "available_energy" in cols
    observed = jaxgrid.trajectory_columns(env, traj, observations=True)
    np.testing.assert_array_equal(  # the peer's layout: 3 local entries, then the hour
        observed["obs[School1][hour]"],
        np.asarray(traj.obs)[:, 25, 3],
    )
    batched = jax.vmap(
        lambda k: jaxgrid.rollout(env, params, lambda k, o: jnp.zeros((26, 6)), k, 2)
    )(jax.random.split(KEY, 2))
    with pytest.raises(ValueError, match="one environment"):
        jaxgrid.trajectory_columns(env, batched)
    with pytest.raises(ValueError, match=".xlsx"):
        jaxgrid.export_trajectory(env, traj, tmp_path / "run.xlsx")
