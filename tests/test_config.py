"""Scenario files: every registered environment from its file, and malformed files refused
with one clear error naming the file, the key path and what was expected."""

import math
import shutil
from pathlib import Path

import jax
import numpy as np
import pytest
from conftest import full_only, sampled

import jaxgrid
from jaxgrid.config import ConfigError, make_from_config
from jaxgrid.registry import list_envs

CONFIGS = Path(__file__).parents[1] / "configs"


def _same_params(a, b):
    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    return jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b) and all(
        np.array_equal(x, y) and np.asarray(x).dtype == np.asarray(y).dtype for x, y in zip(la, lb)
    )


def _scenario(tmp_path, file_name: str, text: str) -> Path:
    """A scenario file ``file_name`` holding ``text``."""
    path = tmp_path / file_name
    path.write_text(text)
    return path


# their make() solves an optimisation or a 118-bus flow (11-15 s each): validation only
SLOW_TO_MAKE = {
    "ders141-v0",
    "opf118-v0",
    "opf14-v0",
    "tso118-continuous-v0",
    "tso118-v0",
    "tso14-continuous-v0",
    "tso300-continuous-v0",
    "tso300-v0",
    "voltage123-reg-v0",
}


@pytest.mark.parametrize("name", sampled(list_envs(), keep=set(list_envs()) - SLOW_TO_MAKE))
def test_every_registered_environment_has_a_file_that_builds_it(name):
    env, params = make_from_config(CONFIGS / f"{name}.toml")
    ref_env, ref_params = jaxgrid.make(name)
    assert _same_params(params, ref_params)
    assert (env.name, env.agents, env.objective_names, env.horizon) == (
        ref_env.name,
        ref_env.agents,
        ref_env.objective_names,
        ref_env.horizon,
    )


def test_no_file_for_an_unregistered_environment():
    assert sorted(p.stem for p in CONFIGS.glob("*.toml")) == list_envs()


def test_yaml_and_overrides(tmp_path):
    path = _scenario(
        tmp_path,
        "bowl.yaml",
        "env: voltage33-v0\nepisode: {duration_h: 24, sampling_time_min: 15}\n"
        "params:\n  barrier: bowl\n  q_weight: 0.02\n  abort: {min_vm_pu: [0.8, 1.2]}\n",
    )
    _, params = make_from_config(path)
    _, ref = jaxgrid.make(
        "voltage33-v0", barrier="bowl", q_weight=0.02, abort={"min_vm_pu": (0.8, 1.2)}
    )
    assert _same_params(params, ref)


def test_episode_sets_the_steps_per_day(tmp_path):
    path = _scenario(
        tmp_path,
        "hourly.toml",
        'env = "ders33-v0"\n[episode]\nduration_h = 24\nsampling_time_min = 60\n',
    )
    env, _ = make_from_config(path)
    assert env.horizon == 24


MALFORMED = [
    # (file name, content, the key path and the expectation the error must name)
    ("top.toml", 'env = "voltage33-v0"\n[feeder]\ncase = "x"\n', r"feeder: unknown key"),
    ("typo.toml", 'env = "voltage33-v0"\n[params]\nq_wieght = 0.1\n', r"params\.q_wieght: unknown argument of voltage33-v0"),
    ("type.toml", 'env = "voltage33-v0"\n[params]\nq_weight = "0.1"\n', r"params\.q_weight: Input should be a valid number"),
    ("capacity.toml", 'env = "arbitrage-v0"\n[params]\ncapacity_mwh = -2.0\n', r"params\.capacity_mwh: Input should be greater than 0"),
    ("nan.toml", 'env = "voltage33-v0"\n[params]\nq_weight = nan\n', r"params\.q_weight: Input should be a finite number"),
    ("inf.toml", 'env = "dso33-v0"\n[params]\nload_scale = inf\n', r"params\.load_scale: Input should be a finite number"),
    ("efficiency.toml", 'env = "arbitrage-v0"\n[params]\nefficiency = 1.5\n', r"params\.efficiency: Input should be less than or equal to 1"),
    ("env.toml", 'env = "voltage34-v0"\n', r"env: expected one of \[.*'voltage33-v0'"),
    ("noenv.toml", "[params]\nq_weight = 0.1\n", r"env: missing; expected the name of a registered environment"),
    ("divide.toml", 'env = "ders33-v0"\n[episode]\nduration_h = 24\nsampling_time_min = 7\n', r"episode: sampling_time_min = 7 does not divide duration_h = 24"),
    ("zero.toml", 'env = "ders33-v0"\n[episode]\nduration_h = 24\nsampling_time_min = 0\n', r"episode\.sampling_time_min: Input should be greater than 0"),
    ("episodekey.toml", 'env = "ders33-v0"\n[episode]\nlength = 24\nduration_h = 24\nsampling_time_min = 30\n', r"episode\.length: Extra inputs are not permitted"),
    ("steps.toml", 'env = "voltage33-v0"\n[episode]\nduration_h = 24\nsampling_time_min = 30\n', r"episode: voltage33-v0 runs 96 steps per episode; \[episode\] gives 48"),
    ("twoday.toml", 'env = "arbitrage-v0"\n[episode]\nduration_h = 48\nsampling_time_min = 60\n', r"episode\.duration_h: arbitrage-v0 episodes last one day"),
    ("syntax.toml", 'env = "voltage33-v0"\n[params\nq_weight = 0.1\n', r"syntax\.toml: not valid TOML"),
    ("syntax.yaml", "env: voltage33-v0\nparams: [q_weight: 0.1\n", r"syntax\.yaml: not valid YAML"),
    ("list.yaml", "- env: voltage33-v0\n", r"expected a table at the top level, got list"),
    ("scenario.json", "{}", r"scenario\.json: expected a \.toml, \.yaml or \.yml scenario file"),
    ("abort.toml", 'env = "voltage33-v0"\n[params]\nabort = { min_vm_pu = [1.2, 0.8] }\n', r"params\.abort\.min_vm_pu: expected low <= high, got \[1\.2, 0\.8\]"),
    ("abortvar.toml", 'env = "voltage33-v0"\n[params]\nabort = { max_soc = [0.0, 1.0] }\n', r"params: .*max_soc"),
    ("generator.toml", 'env = "smartgrid-v0"\n[params]\ngenerator = "plentiful"\n', r"params: .*plentiful"),
    ("soc.toml", 'env = "arbitrage-v0"\n[params]\nsoc_bounds = [0.9, 0.1]\n', r"params\.soc_bounds: expected \(low, high\) with low <= high"),
    ("households.toml", 'env = "smartgrid-v0"\n[params]\nhouseholds = -3\n', r"params\.households: Input should be greater than or equal to 0"),
    ("bool.toml", 'env = "smartgrid-v0"\n[params]\nhouseholds = true\n', r"params\.households: Input should be a valid integer"),
    ("band.toml", 'env = "dso33-v0"\n[params]\nv_band = [0.94]\n', r"params\.v_band: too few entries: entry 1 is missing"),
    ("weights.toml", 'env = "ders33-v0"\n[params]\nweights = [-1.0, 20.0, 50.0, 5.0, 1.0]\n', r"params\.weights: expected non-negative weights"),
    ("objective.toml", 'env = "smartgrid-v0"\n[params]\nobjectives = ["happiness"]\n', r"params: .*happiness"),
    ("params.toml", 'env = "voltage33-v0"\nparams = 3\n', r"params: expected a table of voltage33-v0's arguments"),
    ("scenario.toml", 'env = "voltage33-v0"\n[params]\nsolver = "newton"\n', r"params: .*newton"),
    ("envlist.toml", 'env = ["voltage33-v0"]\n', r"env: expected the name of a registered environment, got \['voltage33-v0'\]"),
    ("pvsize.toml", 'env = "voltage33-v0"\n[params]\npv_p_max_mw = -1.0\n', r"(?s)params: voltage33-v0: .*params\.pv_p_max_mw\[0\] = -1: expected >= 0 MW"),
    ("iterations.toml", 'env = "dso33-v0"\n[params]\ndistflow_iterations = 100000000\n', r"params: dso33-v0: distflow_iterations = 100000000: expected 1 to 100"),
    ("scaletype.toml", 'env = "arbitrage-v0"\n[params]\nprice_csv = { path = "p.csv", column = "eur", scale_mult = "x2" }\n', r"params\.price_csv\.scale_mult: Input should be a valid number \(got 'x2'\)"),
    ("scalenan.toml", 'env = "arbitrage-v0"\n[params]\nprice_csv = { path = "p.csv", column = "eur", scale_mult = nan }\n', r"params\.price_csv\.scale_mult: Input should be a finite number"),
    ("sourcekey.toml", 'env = "arbitrage-v0"\n[params]\nprice_csv = { path = "p.csv", colum = "eur" }\n', r"params\.price_csv\.colum: unknown key; expected some of \['path', 'column'"),
]  # fmt: skip


@pytest.mark.parametrize("file_name, content, message", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_file_gives_one_clear_error(tmp_path, file_name, content, message):
    path = _scenario(tmp_path, file_name, content)
    with pytest.raises(ConfigError, match=message) as err:
        make_from_config(path)
    assert str(err.value).startswith(f"{path}: ")  # the file, first
    assert err.value.__cause__ is None  # one error, not a chain from inside


@pytest.mark.parametrize("file_name", ["binary.toml", "binary.yaml"])
def test_a_binary_file_is_one_clear_error(tmp_path, file_name):
    path = tmp_path / file_name
    path.write_bytes(bytes(range(256)))
    with pytest.raises(ConfigError, match=r"binary\.(toml|yaml): not a text file") as err:
        make_from_config(path)
    assert err.value.__cause__ is None


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="no such scenario file"):
        make_from_config(tmp_path / "absent.toml")


# -- your own feeder and profiles -----------------------------------------------------------

CASE33 = Path(jaxgrid.__file__).parent / "grid" / "cases" / "case33bw.m"


def _csv(path, rows, header="minute,load"):
    path.write_text(header + "\n" + "\n".join(",".join(map(str, r)) for r in rows) + "\n")
    return path


def _day_rows(step_min=15, days=1, value=lambda i: 1.0):
    n = days * 24 * 60 // step_min
    return [(i * step_min, value(i)) for i in range(n)]


def _own_feeder_file(tmp_path, extra="", load="load.csv", feeder=None):
    shutil.copy(feeder or CASE33, tmp_path / "feeder.m")
    _csv(tmp_path / "load.csv", _day_rows(value=lambda i: 0.5 + 0.001 * i))
    _csv(tmp_path / "pv.csv", _day_rows(value=lambda i: 0.0), header="minute,pv")
    path = _scenario(
        tmp_path,
        "own.toml",
        'env = "voltage33-v0"\n[params]\nfeeder = "feeder.m"\npv_buses = [18, 25, 33]\n'
        f'load_csv = {{ path = "{load}", column = "load", time_column = "minute", '
        "scale_mult = 2.0, scale_add = 0.1 }\n"
        'pv_csv = { path = "pv.csv", column = "pv", time_column = "minute" }\n' + extra,
    )
    return path


def test_own_feeder_and_csv_profiles(tmp_path):
    env, params = make_from_config(_own_feeder_file(tmp_path))
    assert env.num_agents == 3
    np.testing.assert_array_equal(np.asarray(params.pv_bus), [17, 24, 32])  # bus numbers - 1
    want = (0.5 + 0.001 * np.arange(96)) * 2.0 + 0.1  # value * scale_mult + scale_add
    np.testing.assert_allclose(np.asarray(params.profiles.load)[:, 0], want, rtol=1e-6)
    _, ref = jaxgrid.make("voltage33-v0")
    np.testing.assert_array_equal(np.asarray(params.feeder.r_pu), np.asarray(ref.feeder.r_pu))
    obs, state = env.reset(jax.random.PRNGKey(0), params)
    assert np.all(np.isfinite(np.asarray(obs)))


def test_csv_resampled_to_the_sampling_time(tmp_path):
    from jaxgrid.data.csv_profiles import read_profile

    rows = _day_rows(step_min=5, value=lambda i: float(i))
    source = {
        "path": str(_csv(tmp_path / "fine.csv", rows)),
        "column": "load",
        "time_column": "minute",
    }
    fifteen = read_profile(source, 15)
    np.testing.assert_allclose(fifteen, np.arange(288, dtype=float).reshape(96, 3).mean(1))
    hourly_rows = [(i * 60, float(i)) for i in range(24)]
    source["path"] = str(_csv(tmp_path / "coarse.csv", hourly_rows))
    np.testing.assert_allclose(read_profile(source, 15), np.repeat(np.arange(24.0), 4))


PRICE_SOURCES = [
    # (price.csv's value at row 3, the source's extra keys, what the error must name)
    ("50", {"scale_mult": math.nan}, r"profile source .*price\.csv: scale_mult = nan; expected a finite number"),
    ("50", {"scale_add": "x2"}, r"profile source .*price\.csv: scale_add = 'x2'; expected a finite number"),
    ("1e39", {}, r"price\.csv: row 3: eur = '1e39' \(1e\+39 after scaling\) is beyond float32"),
]  # fmt: skip


@pytest.mark.parametrize("value, keys, message", PRICE_SOURCES)
def test_price_source_values_are_checked(tmp_path, value, keys, message):
    rows = _day_rows(step_min=60)
    rows[1] = (rows[1][0], value)
    source = {"path": str(_csv(tmp_path / "price.csv", rows, header="minute,eur")), "column": "eur"}
    with pytest.raises(ValueError, match=message):
        jaxgrid.make("arbitrage-v0", price_csv={**source, "time_column": "minute", **keys})


def _meshed_case(tmp_path):
    text = CASE33.read_text()
    # one more branch between buses 18 and 33 closes a loop (case33bw's tie lines)
    text = text.replace(
        "mpc.branch = [", "mpc.branch = [\n\t18\t33\t0.5\t0.5\t0\t0\t0\t0\t0\t0\t1\t-360\t360;", 1
    )
    path = _scenario(tmp_path, "meshed.m", text)
    return path


OWN_MALFORMED = [
    ("bus", dict(extra="", pv="pv_buses = [18, 25, 99]"), r"own\.toml: params: .*buses \[99\] are not in the feeder"),
    ("column", dict(load_header="minute,demand"), r"no column 'load'; the file has \['minute', 'demand'\]"),
    ("nan", dict(load_value="nan"), r"load\.csv: row 3: load = 'nan' is not finite"),
    ("order", dict(load_time_swap=True), r"load\.csv: row 4: time does not increase"),
    ("length", dict(load_rows=95), r"load\.csv: 95 steps of 15 min are not whole days"),
    ("meshed", dict(meshed=True), r"own\.toml: params: .*(loop|mesh)"),
    ("slack", dict(pv="pv_buses = [1, 25]"), r"bus 1 is the substation"),
    ("float32", dict(load_value="1e39"), r"load\.csv: row 3: load = '1e39' \(2e\+39 after scaling\) is beyond float32"),
]  # fmt: skip


@pytest.mark.parametrize("case, change, message", OWN_MALFORMED, ids=[c[0] for c in OWN_MALFORMED])
def test_malformed_own_feeder_or_profiles(tmp_path, case, change, message):
    path = _own_feeder_file(
        tmp_path, feeder=_meshed_case(tmp_path) if change.get("meshed") else None
    )
    rows = _day_rows(value=lambda i: 1.0)[: change.get("load_rows", 96)]
    rows = [(t, v) for t, v in rows]
    if "load_value" in change:
        rows[1] = (rows[1][0], change["load_value"])
    if change.get("load_time_swap"):
        rows[1], rows[2] = rows[2], rows[1]
    _csv(tmp_path / "load.csv", rows, header=change.get("load_header", "minute,load"))
    if "pv" in change:
        path.write_text(path.read_text().replace("pv_buses = [18, 25, 33]", change["pv"]))
    with pytest.raises(ConfigError, match=message) as err:
        make_from_config(path)
    assert str(err.value).startswith(f"{path}: ")


def _der_files(tmp_path):
    shutil.copy(CASE33, tmp_path / "feeder.m")
    _csv(tmp_path / "load.csv", _day_rows(days=2, value=lambda i: 0.4 + 0.002 * (i % 96)))
    _csv(tmp_path / "pv.csv", _day_rows(days=2, value=lambda i: 0.5), header="minute,pv")
    _csv(tmp_path / "price.csv", _day_rows(days=2, value=lambda i: 40.0 + i % 96), "minute,eur")


DER_SCENARIO = """env = "ders33-v0"
[params]
feeder = "feeder.m"
devices = { battery = [18], pv = [25, 33], flexload = [10], ev = [6, 30] }
load_csv = { path = "load.csv", column = "load", time_column = "minute" }
pv_csv = { path = "pv.csv", column = "pv", time_column = "minute" }
price_csv = { path = "price.csv", column = "eur", time_column = "minute" }
"""


@full_only
def test_der_devices_on_own_buses_with_csv_profiles(tmp_path):
    _der_files(tmp_path)
    env, params = make_from_config(_scenario(tmp_path, "ders.toml", DER_SCENARIO))
    assert env.agent_types == ("battery", "pv", "pv", "flexload", "ev", "ev")
    for field, buses in (("battery_bus", [18]), ("pv_bus", [25, 33]), ("flex_bus", [10]),
                         ("ev_bus", [6, 30])):  # fmt: skip
        np.testing.assert_array_equal(np.asarray(getattr(params, field)), np.array(buses) - 1)
    # 15-minute CSV rows averaged to the environment's 30 minutes
    load = 0.4 + 0.002 * (np.arange(192) % 96)
    np.testing.assert_allclose(params.profiles.load[:, 0], load.reshape(96, 2).mean(1), rtol=1e-6)
    price = 40.0 + np.arange(192) % 96
    np.testing.assert_allclose(params.profiles.price[:, 0], price.reshape(96, 2).mean(1))
    _, registered = jaxgrid.make("ders33-v0")  # same feeder: the bundled sizes
    np.testing.assert_allclose(params.battery.p_max_mw, registered.battery.p_max_mw[:1])
    _, state = env.reset(jax.random.PRNGKey(0), params)
    for k in range(3):
        action = env.action_space(params).sample(jax.random.PRNGKey(k))
        obs, state, reward, *_ = env.step_env(jax.random.PRNGKey(k), state, action, params)
    assert np.all(np.isfinite(np.asarray(obs))) and np.all(np.isfinite(np.asarray(reward)))


def test_der_device_sizes_in_the_scenario(tmp_path):
    _der_files(tmp_path)
    text = DER_SCENARIO.replace(
        "battery = [18]", "battery = { buses = [18, 22], p_max_mw = 0.4, capacity_mwh = 1.6 }"
    ).replace("flexload = [10]", "flexload = { buses = [10], size_mw = 0.3 }")
    env, params = make_from_config(_scenario(tmp_path, "ders.toml", text))
    np.testing.assert_allclose(params.battery.p_max_mw, [0.4, 0.4])
    np.testing.assert_allclose(params.battery.capacity_mwh, [1.6, 1.6])
    np.testing.assert_allclose(params.battery.s_max_mva, [0.44, 0.44])  # 1.1 x the rating
    np.testing.assert_allclose(params.flex_size_mw, [0.3])
    np.testing.assert_allclose(params.flex.curtail_cap_mw, [0.15])  # half the size


def test_arbitrage_on_a_price_csv(tmp_path):
    hourly = [(h * 60, 30.0 + (50.0 if h % 24 in (18, 19) else 0.0) - (20.0 if h % 24 == 3 else 0.0))
              for h in range(24 * 6)]  # fmt: skip
    _csv(tmp_path / "price.csv", hourly, header="minute,eur")
    text = 'env = "arbitrage-v0"\n[params]\nprice_csv = { path = "price.csv", column = "eur", time_column = "minute" }\n'
    env, params = make_from_config(_scenario(tmp_path, "prices.toml", text))
    np.testing.assert_allclose(params.profiles.price[:, 0], [v for _, v in hourly])
    np.testing.assert_array_equal(params.profiles.held_out, [4])  # every fifth day
    _, state = env.reset(jax.random.PRNGKey(0), params)
    # buy at 10 at 03:00, sell at 80 at 18:00-19:00: the oracle earns, idling earns 0
    assert env.oracle_return(params, jax.device_get(state)) > 0


def test_smartgrid_society_on_its_own_feeder_and_buses(tmp_path):
    shutil.copy(CASE33, tmp_path / "feeder.m")
    buses = list(range(33, 7, -1))  # 26 agents from the far end of the feeder
    text = f'env = "smartgrid33-v0"\n[params]\nfeeder = "feeder.m"\nagent_buses = {buses}\n'
    env, params = make_from_config(_scenario(tmp_path, "society.toml", text))
    np.testing.assert_array_equal(np.asarray(params.agent_bus), np.array(buses) - 1)
    path = _scenario(tmp_path, "few.toml", text.replace("[33, ", "["))
    with pytest.raises(
        ConfigError,
        match=r"few\.toml: params: agent_buses: expected one bus per agent \(26\), got 25",
    ):
        make_from_config(path)


def test_grid_file_beside_the_scenario(tmp_path):
    bundled = Path(jaxgrid.__file__).parent / "envs" / "gardeners" / "grids" / "peer_example.txt"
    shutil.copy(bundled, tmp_path / "my_grid.txt")
    path = _scenario(
        tmp_path, "grid.toml", 'env = "gardeners-v0"\n[params]\ngrid_file = "my_grid.txt"\n'
    )
    _, params = make_from_config(path)
    _, registered = jaxgrid.make("gardeners-file-v0")
    assert _same_params(params.layout, registered.layout)


DSO_SCENARIO = """env = "dso33-v0"
[params]
feeder = "feeder.m"
flex_loads = [[6, 0.165], [14, 0.110], [18, 0.110], [22, 0.088], [28, 0.132], [33, 0.110]]
"""


def test_dso_on_its_own_case_file_equals_the_registered_one(tmp_path):
    shutil.copy(CASE33, tmp_path / "feeder.m")
    _, params = make_from_config(_scenario(tmp_path, "dso.toml", DSO_SCENARIO))
    _, registered = jaxgrid.make("dso33-v0")
    assert _same_params(params, registered)  # PowerZoo's six flexible loads, as bundled


def test_dso_flexible_loads_and_csv_load(tmp_path):
    _der_files(tmp_path)
    text = DSO_SCENARIO.replace(
        "flex_loads = [[6, 0.165]", "flex_loads = [[9, 0.3], [31, 0.2]]\n# [[6, 0.165]"
    )
    text += 'load_csv = { path = "load.csv", column = "load", time_column = "minute" }\n'
    env, params = make_from_config(_scenario(tmp_path, "dso.toml", text))
    assert env.action_space(params).shape == (1, 4)  # two curtailment and two shift shares
    assert env.action_names == (
        "curtail_share[0]",
        "curtail_share[1]",
        "shift_share[0]",
        "shift_share[1]",
    )
    np.testing.assert_array_equal(np.asarray(params.flex_bus), [8, 30])
    np.testing.assert_allclose(params.flex.curtail_cap_mw, [0.3, 0.2])
    obs, _ = env.reset(jax.random.PRNGKey(0), params)
    assert obs.shape == (1, 3 * 33 + 2 * 32 + 2 + 5 * 2)


FAMILY_MALFORMED = [
    (DER_SCENARIO.replace("ev = [6, 30]", "ev = [6, 30], wind = [4]"), r"ders\.toml: params: devices: unknown type 'wind'"),
    (DER_SCENARIO.replace(", ev = [6, 30]", ""), r"params: devices\.ev: expected at least one bus number"),
    (DER_SCENARIO.replace("pv = [25, 33]", "pv = [25, 34]"), r"params: devices\.pv: buses \[34\] are not in the feeder"),
    (DER_SCENARIO.replace("battery = [18]", "battery = [1]"), r"params: devices\.battery: bus 1 is the substation"),
    (DER_SCENARIO.replace("price_csv", "# price_csv"), r"params: load_csv, pv_csv and price_csv go together"),
    (DER_SCENARIO.replace("battery = [18]", "battery = { buses = [18], p_mw = 0.4 }"), r"params: devices\.battery\.p_mw: unknown key; expected buses and some of \['p_max_mw', 'capacity_mwh'\]"),
    (DER_SCENARIO.replace("battery = [18]", "battery = { buses = [18], capacity_mwh = -1.0 }"), r"params: devices\.battery\.capacity_mwh: expected a positive number, got -1\.0"),
    (DSO_SCENARIO.replace("flex_loads", "# flex_loads"), r"params: flex_loads: give the flexible loads' buses"),
    (DSO_SCENARIO.replace("[33, 0.110]", "[33, -0.1]"), r"params: flex_loads: capacities must be positive MW"),
    (DSO_SCENARIO.replace("[33, 0.110]", "[40, 0.1]"), r"params: flex_loads: buses \[40\] are not in the feeder"),
    (DSO_SCENARIO.replace("[33, 0.110]]", "[33]]"), r"params\.flex_loads\.5: too few entries"),
]  # fmt: skip


@pytest.mark.parametrize("text, message", FAMILY_MALFORMED)
def test_malformed_der_or_dso_network(tmp_path, text, message):
    _der_files(tmp_path)
    name = "ders.toml" if "ders33" in text else "dso.toml"
    with pytest.raises(ConfigError, match=message) as err:
        make_from_config(_scenario(tmp_path, name, text))
    assert err.value.__cause__ is None


def test_reward_section_sets_the_scalarisation(tmp_path):
    path = _scenario(
        tmp_path,
        "reward.toml",
        'env = "voltage33-v0"\n[reward]\nscalarisation = "weighted_sum"\n'
        "weights = { reactive_power = 0.25 }\n",
    )
    env, params = make_from_config(path)
    np.testing.assert_allclose(np.asarray(params.scalarisation.weights), [0.0, 0.25])
    _, state = env.reset(jax.random.PRNGKey(0), params)
    *_, reward, _, _, info = env.step_env(
        jax.random.PRNGKey(1), state, np.full((6, 1), 0.5), params
    )
    np.testing.assert_allclose(reward, 0.25 * np.asarray(info["reward_vector"])[:, 1], rtol=1e-6)
    # the same weights reach a training run
    from jaxgrid.cli import _run_config, build_parser

    config = _run_config(
        build_parser().parse_args(["train", "--config", str(path), "--algo", "ippo"])
    )
    assert config.weights == [[0.0, 0.25]]


def test_reward_section_sets_a_cost_penalty(tmp_path):
    path = _scenario(
        tmp_path,
        "penalty.toml",
        'env = "voltage33-v0"\n[reward]\ncost_penalty = { voltage_band = 10.0 }\n',
    )
    env, params = make_from_config(path)
    np.testing.assert_allclose(np.asarray(params.scalarisation.cost_weights), [10.0, 0.0])
    _, registered = jaxgrid.make("voltage33-v0")
    np.testing.assert_array_equal(params.scalarisation.weights, registered.scalarisation.weights)
    # a training run builds the same params from the file
    from jaxgrid.cli import _run_config, build_parser

    config = _run_config(build_parser().parse_args(["train", "--config", str(path)]))
    assert config.cost_penalty == {"voltage_band": 10.0}
    _, run_params = config.make_env()
    assert _same_params(run_params.scalarisation, params.scalarisation)


REWARD_MALFORMED = [
    ("weights = { happiness = 1.0 }", r"reward\.weights\.happiness: not an objective of voltage33-v0"),
    ("weights = { voltage = -1.0 }", r"reward\.weights\.voltage: Input should be greater than or equal to 0"),
    ('scalarisation = "median"', r"reward\.scalarisation: Input should be 'weighted_sum', 'min', 'product' or 'single'"),
    ("temperature = 2.0", r"reward\.temperature: Extra inputs are not permitted"),
    ("cost_penalty = { voltage = 1.0 }", r"reward\.cost_penalty\.voltage: not a cost of voltage33-v0; expected some of \['voltage_band', 'power_flow'\]"),
    ("cost_penalty = { voltage_band = -1.0 }", r"reward\.cost_penalty\.voltage_band: Input should be greater than or equal to 0"),
]  # fmt: skip


@pytest.mark.parametrize("body, message", REWARD_MALFORMED)
def test_malformed_reward_section(tmp_path, body, message):
    path = _scenario(tmp_path, "reward.toml", f'env = "voltage33-v0"\n[reward]\n{body}\n')
    with pytest.raises(ConfigError, match=message):
        make_from_config(path)


def test_reward_section_reaches_a_society_on_a_feeder(tmp_path):
    path = _scenario(
        tmp_path,
        "society.toml",
        'env = "smartgrid33-v0"\n[reward]\nweights = { equity = 1.0, comfort = 0.5 }\n',
    )
    env, params = make_from_config(path)
    weights = dict(zip(env.objective_names, np.asarray(env.scalarisation(params).weights)))
    assert weights == {
        "adaptability_three": 0.0,
        "equity": 1.0,
        "over_consumption": 0.0,
        "comfort": 0.5,
    }
