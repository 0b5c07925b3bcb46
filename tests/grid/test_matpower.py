"""The MATPOWER loader: the MATLAB subset, the bundled cases, and its error messages."""

import textwrap

import numpy as np
import pytest

from jaxgrid.grid import case33bw, case69, case141, from_matpower, from_pandapower, load_case
from jaxgrid.grid.cases import CASES, load_bundled

DATA = __import__("pathlib").Path(__file__).parents[1] / "data"


def write_case(tmp_path, body: str, name="case.m"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


def test_matlab_comments_continuations_and_indexed_assignment(tmp_path):
    path = write_case(
        tmp_path,
        """
        function mpc = t
        %{
        a block comment; mpc.baseMVA = 99;
        %}
        mpc.baseMVA = 10;
        mpc.bus = [ 1 2 3      % a comment; with a semicolon
                    4 5 6 ];
        mpc.bus(:, 2) = mpc.bus(:, 2) * ...
            100;
        mpc.bus(2, [1 3]) = [7 9];
        mpc.branch = mpc.bus(1, :);
        mpc.name = 'x%y';
        """,
    )
    mpc = load_case(path)
    np.testing.assert_array_equal(mpc["bus"], [[1, 200, 3], [7, 500, 9]])
    np.testing.assert_array_equal(mpc["branch"], [[1, 200, 3]])
    assert mpc["name"] == "x%y"
    assert float(mpc["baseMVA"]) == 10


def test_matlab_expressions_evaluate_like_matlab(tmp_path):
    path = write_case(
        tmp_path,
        """
        mpc.baseMVA = 1;
        mpc.bus = 0;
        mpc.a = [1 -2];
        mpc.b = [1 - 2, 3-1];
        mpc.c = -2^2 + 2^-1;
        mpc.d = sin(acos(0.6)) * 10;
        mpc.e = [4 5 6];
        mpc.f = mpc.e(1, [1 3]) ./ [2 3];
        mpc.g = mpc.e(2);
        mpc.branch = 0;
        """,
    )
    mpc = load_case(path)
    np.testing.assert_array_equal(mpc["a"], [[1, -2]])
    np.testing.assert_array_equal(mpc["b"], [[-1, 2]])
    assert float(mpc["c"]) == -3.5
    assert float(mpc["d"]) == pytest.approx(8.0)
    np.testing.assert_allclose(mpc["f"], [[2, 2]])
    np.testing.assert_array_equal(mpc["e"][0], [4, 5, 6])
    assert float(mpc["g"].item()) == 5


def test_unsupported_statement_names_file_and_line(tmp_path):
    path = write_case(
        tmp_path,
        """
        mpc.baseMVA = 10;
        for i = 1:3
        """,
    )
    with pytest.raises(ValueError, match=r"case\.m:3: cannot run"):
        load_case(path)


def test_case33bw_matches_pandapower_networks_data():
    """The loader's unit conversion against pandapower's own copy of Baran & Wu."""
    pn = pytest.importorskip("pandapower.networks")
    ours = case33bw()
    theirs = from_pandapower(pn.case33bw())
    assert ours.n_bus == theirs.n_bus == 33
    np.testing.assert_array_equal(ours.bus_ids, np.arange(1, 34))
    np.testing.assert_array_equal(theirs.bus_ids, np.arange(33))
    np.testing.assert_array_equal(ours.branch_ids, theirs.branch_ids)  # 32 of 37 rows in service
    np.testing.assert_allclose(ours.r_pu, theirs.r_pu, rtol=1e-12)
    np.testing.assert_allclose(ours.x_pu, theirs.x_pu, rtol=1e-12)
    np.testing.assert_allclose(ours.p_load_mw, theirs.p_load_mw, rtol=1e-12)
    np.testing.assert_allclose(ours.q_load_mvar, theirs.q_load_mvar, rtol=1e-12)
    np.testing.assert_array_equal(ours.parent, theirs.parent)


def test_case141_loads_follow_the_power_factor_statements():
    f = case141()
    # bus data in kVA at 0.85 power factor: |S| = Pd / 0.85 and Q / P = tan(acos(0.85))
    loaded = np.asarray(f.p_load_mw) > 0
    ratio = np.asarray(f.q_load_mvar)[loaded] / np.asarray(f.p_load_mw)[loaded]
    np.testing.assert_allclose(ratio, np.tan(np.arccos(0.85)), rtol=1e-12)
    assert float(np.sum(f.p_load_mw)) == pytest.approx(11.94, abs=0.01)


def test_bundled_cases_are_cached_and_complete():
    assert case69() is case69()
    for name in CASES:
        f = load_bundled(name)
        assert f.n_branch == f.n_bus - 1
        # only case136ma rates its lines (100 MVA); rate 0 in the file means unrated
        assert np.all(np.isinf(f.rate_mva)) or name == "case136ma"
    assert np.all(np.asarray(load_bundled("case136ma").rate_mva) == 100)


def test_two_level_case_features():
    f = from_matpower(DATA / "two_levels.m")
    np.testing.assert_array_equal(f.bus_ids, [20, 10, 30, 40, 50, 60])
    assert int(f.slack) == 1 and float(f.vm_slack_pu) == 1.02
    np.testing.assert_array_equal(f.branch_ids, [0, 1, 2, 3, 4])  # tie line row 5 is open
    np.testing.assert_allclose(f.base_kv, [20, 20, 20, 0.4, 0.4, 20])
    assert float(f.p_load_mw[3]) == pytest.approx(-0.36)  # negative load = generation
    assert float(f.rate_mva[0]) == 12 and np.isinf(f.rate_mva[1])
    assert float(f.r_pu[3]) == pytest.approx(0.008 / (0.4**2 / 10))


@pytest.mark.parametrize(
    "edit, message",
    [
        (("10	3	0", "10	1	0"), "exactly one slack"),
        (
            (
                "30	40	0	0	0	0	0	0	1	0",
                "30	40	0	0	0	0	0	0	1.05	0",
            ),
            "off-nominal tap",
        ),
        (
            (
                "30	40	0	0	0	0	0	0	1	0",
                "30	40	0	0	0	0	0	0	1	30",
            ),
            "phase shift",
        ),
        (
            (
                "10	20	1.2	2.1	0.0004	12	0	0	0	0	1",
                "10	20	1.2	2.1	0.0004	12	0	0	0	0	0",
            ),
            "disconnected",
        ),
        (
            (
                "60	30	1.0	1.0	0	0	0	0	0	0	0",
                "60	30	1.0	1.0	0	0	0	0	0	0	1",
            ),
            "meshed",
        ),
    ],
)
def test_unsupported_networks_are_named(tmp_path, edit, message):
    text = (DATA / "two_levels.m").read_text()
    old, new = edit
    assert old in text
    path = tmp_path / "edited.m"
    path.write_text(text.replace(old, new, 1))
    with pytest.raises(ValueError, match=message):
        from_matpower(path)


@pytest.mark.parametrize(
    "edit, message",
    [
        # bus 30 renumbered 2.5 in the bus and branch tables (once truncated to bus 2)
        (("\t30\t", "\t2.5\t", -1), r"edited\.m: mpc\.bus row 3: BUS_I = 2\.5 is not a bus number"),
        # bus 20's VMAX and VMIN swapped: an inverted band
        (("1\t1.1\t0.9;", "1\t0.9\t1.1;", 1), r"vmin_pu is above vmax_pu at buses \[20\]"),
    ],
)
def test_bus_numbers_and_voltage_limits_are_checked(tmp_path, edit, message):
    text = (DATA / "two_levels.m").read_text()
    old, new, count = edit
    assert old in text
    path = tmp_path / "edited.m"
    path.write_text(text.replace(old, new, count))
    with pytest.raises(ValueError, match=message):
        from_matpower(path)


def test_a_binary_file_is_one_clear_error(tmp_path):
    path = tmp_path / "case.m"
    path.write_bytes(bytes(range(256)))
    with pytest.raises(ValueError, match=r"case\.m: not a MATPOWER case") as err:
        from_matpower(path)
    assert err.value.__cause__ is None


def test_generator_away_from_the_slack_is_rejected(tmp_path):
    text = (
        (DATA / "two_levels.m")
        .read_text()
        .replace(
            "	10	0	0	10	-10	1.02	100	1	10	0;",
            "	10	0	0	10	-10	1.02	100	1	10	0;\n	50	0.1	0	1	-1	1.0	100	1	1	0;",
        )
    )
    path = tmp_path / "gen.m"
    path.write_text(text)
    with pytest.raises(ValueError, match=r"generators at buses \[50\]"):
        from_matpower(path)


def test_two_level_case_matches_pandapower_from_ppc():
    """An independent conversion (pandapower's from_ppc, which models the 20/0.4 kV branch as
    an impedance element) solved by Newton-Raphson agrees with DistFlow: voltages, angles,
    and the import with shunt, line charging and a negative load."""
    from conftest import run_ac, x64
    from pandapower.converter.pypower import from_ppc

    from jaxgrid.grid import distflow, voltage_angles

    mpc = load_case(DATA / "two_levels.m")

    def pad(a, n):
        a = np.atleast_2d(a)
        return np.hstack([a, np.zeros((a.shape[0], n - a.shape[1]))])

    ppc = {
        "version": "2",
        "baseMVA": float(mpc["baseMVA"]),
        "bus": pad(mpc["bus"], 13),
        "branch": pad(mpc["branch"], 13),
        "gen": pad(mpc["gen"], 21),
    }
    net = run_ac(from_ppc(ppc, f_hz=50, validate_conversion=False))
    feeder = from_matpower(DATA / "two_levels.m")
    with x64():
        res = distflow(feeder, feeder.p_load_mw, feeder.q_load_mvar, iterations=30)
        va = np.asarray(voltage_angles(feeder, res))
        assert bool(res.converged)
        vm = np.asarray(res.vm_pu)
        p_import, q_import = float(res.p_import_mw), float(res.q_import_mvar)
    ids = np.asarray(feeder.bus_ids)
    np.testing.assert_allclose(vm, net.res_bus.vm_pu.loc[ids], atol=1e-6)
    np.testing.assert_allclose(va, net.res_bus.va_degree.loc[ids], atol=1e-5)
    assert p_import == pytest.approx(net.res_ext_grid.p_mw.sum(), abs=1e-6)
    assert q_import == pytest.approx(net.res_ext_grid.q_mvar.sum(), abs=1e-6)
