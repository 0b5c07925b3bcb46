"""The devices' smooth surrogates (``BatteryParams.smoothing_mw``, the inverter's
``smoothing_mvar``, ``DataCentreParams.cooling_smoothing_mw``, ``DieselParams.smoothing_mw``
and ``commit_smoothing_mw``, the regulator agents' ``tap_smoothing_steps``): exact at 0, a
derivative on the clipped side that equals central differences, and the exact model
recovered as the width shrinks; alone and through an environment's step."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import float64_leaves, full_only
from test_datacentre import params as dc_params
from test_datacentre import state as dc_state
from test_datacentre import step as dc_step
from test_devices import battery as device_battery
from test_diesel import params as diesel_params
from test_diesel import run as run_diesel

import jaxgrid
from jaxgrid.devices import (
    BatteryParams,
    DieselState,
    battery_step,
    diesel_off,
    diesel_step,
    power_limits,
    reactive_headroom_mvar,
)
from jaxgrid.devices.datacentre import thermal_coefficients
from jaxgrid.devices.regulator import load_regcontrols, move_taps


def battery(width, **kw):
    """``test_devices``' battery in float64, its power limits smoothed over ``width`` MW."""
    return device_battery(dtype=jnp.float64, smoothing_mw=width, **kw)


def _central(f, x, h=1e-6):
    return float(f(x + h) - f(x - h)) / (2 * h)


def test_battery_gradient_on_the_clipped_side(float64):
    """At soc 0.8 the battery can charge (0.9 - 0.8) * 2 MWh / 0.9 = 0.222 MW in an hour;
    asked for 0.3 MW the exact model enacts 0.222 MW whatever the request (derivative 0)."""
    soc, q = jnp.array([0.8]), jnp.array([0.0])
    limit = 0.1 * 2.0 / 0.9

    def enacted(request, width):
        return battery_step(soc, jnp.array([request]), q, 1.0, battery(width)).p_mw[0]

    def new_soc(request, width):
        return battery_step(soc, jnp.array([request]), q, 1.0, battery(width)).soc[0]

    assert float(enacted(0.3, 0.0)) == pytest.approx(limit, rel=1e-12)
    assert float(jax.grad(enacted)(0.3, 0.0)) == 0.0
    for width in (0.1, 0.03):
        analytic = float(jax.grad(enacted)(0.3, width))
        assert analytic > 1e-3  # the derivative decays over a few widths, not at once
        assert analytic == pytest.approx(_central(lambda r, w=width: enacted(r, w), 0.3), rel=1e-7)
        d_soc = float(jax.grad(new_soc)(0.3, width))
        assert d_soc == pytest.approx(analytic * 0.9 / 2.0, rel=1e-9)  # eta / capacity
        assert float(new_soc(5.0, width)) <= 0.9  # never beyond soc_max


def test_battery_surrogate_approaches_the_exact_model(float64):
    soc, q = jnp.array([0.8]), jnp.array([0.0])
    requests = jnp.linspace(-1.5, 1.5, 301)

    def enacted(width):
        step = jax.vmap(lambda r: battery_step(soc, r[None], q, 1.0, battery(width)).p_mw[0])
        return step(requests)

    exact = enacted(0.0)
    errors = [float(jnp.max(jnp.abs(enacted(w) - exact))) for w in (0.1, 0.01, 0.001)]
    for w, error in zip((0.1, 0.01, 0.001), errors):
        # two rounded corners, each at most w log 2 (jaxgrid.smooth)
        assert error <= 2 * w * np.log(2.0)
    assert errors[0] > errors[1] > errors[2]


def test_battery_smoothing_zero_is_the_exact_clip(float64):
    """Width 0: the hand-worked exact clip of tests/devices/test_devices.py, bit for bit
    between the default and an explicit 0, with a zero derivative beyond the limit."""
    soc, q = jnp.array([0.5]), jnp.array([0.0])
    default = BatteryParams(**{k: v for k, v in vars(battery(0.0)).items() if k != "smoothing_mw"})
    for request in (-3.0, -0.2, 0.4, 3.0):
        a = battery_step(soc, jnp.array([request]), q, 0.5, default)
        b = battery_step(soc, jnp.array([request]), q, 0.5, battery(0.0))
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)
    # 3 MW for half an hour from soc 0.5: at most 0.4 * 2 / 0.9 / 0.5 = 1.78 -> p_max 1 MW
    out = battery_step(soc, jnp.array([3.0]), q, 0.5, battery(0.0))
    assert float(out.p_mw[0]) == 1.0


def test_inverter_headroom_derivative_at_the_rating(float64):
    """``sqrt(s^2 - p^2)`` has an infinite derivative at ``p = s`` and 0 beyond; the
    surrogate's is finite, equals central differences, and its headroom at ``p = s`` is
    ``w sqrt(log 2)``."""
    s_max = jnp.float64(1.2)
    for w in (0.1, 0.02):
        head = lambda p, w=w: reactive_headroom_mvar(p, s_max, w)  # noqa: E731
        assert float(head(s_max)) == pytest.approx(w * np.sqrt(np.log(2.0)), rel=1e-12)
        for p in (1.15, 1.2, 1.25):
            analytic = float(jax.grad(head)(jnp.float64(p)))
            assert np.isfinite(analytic) and analytic < 0
            assert analytic == pytest.approx(_central(head, jnp.float64(p), 1e-7), rel=1e-6)
        # far from the rating the exact headroom
        assert float(head(0.6)) == pytest.approx(float(np.sqrt(1.2**2 - 0.36)), abs=1e-12)
    assert float(jax.grad(lambda p: reactive_headroom_mvar(p, s_max))(jnp.float64(1.25))) != (
        float(jax.grad(lambda p: reactive_headroom_mvar(p, s_max, 0.05))(jnp.float64(1.25)))
    )


@full_only
def test_arbitrage_step_gradient_with_a_smoothed_battery(float64):
    """A full-power charge request near a full battery: the exact step's reward does not
    move with the request; with ``smoothing_mw`` it does, as central differences say."""
    env, params = jaxgrid.make("arbitrage-v0")
    params = float64_leaves(params)
    _, state = env.reset(jax.random.PRNGKey(0), params)
    b = params.battery
    state = state.replace(soc=jnp.asarray(b.soc_max - 0.02, jnp.float64).reshape(state.soc.shape))

    def reward(a, width):
        p = params.replace(battery=b.replace(smoothing_mw=width))
        return env.step_env(jax.random.PRNGKey(1), state, jnp.full((1, 1), a), p)[2][0]

    p_max = float(b.p_max_mw[0])
    limit = float(power_limits(state.soc, params.dt_h, b)[1][0])  # MW the soc allows
    width = 0.05 * p_max
    action = jnp.float64((limit + width) / p_max)  # one width beyond the limit
    assert float(jax.grad(reward)(action, 0.0)) == 0.0
    analytic = float(jax.grad(reward)(action, width))
    assert abs(analytic) > 1e-3 * abs(float(jax.grad(reward)(jnp.float64(0.0), 0.0)))
    numeric = _central(lambda a: reward(a, width), action, 1e-5)
    assert analytic == pytest.approx(numeric, rel=1e-6)


# The inverters' reactive headroom in the environments that clip it: the width's params
# leaf and the rating's, per environment (voltage33's is VoltageParams.pv_q_smoothing_mvar;
# the three-phase environments count in kW and kvar). Each check compiles a float64
# step of a feeder environment (35-65 s on two cores), so they run with
# JAXGRID_VALIDATE=full, as tests/envs/test_gradients.py's; the default suite checks the
# leaves' validation (tests/test_validation.py) and the surrogate itself (above).
INVERTERS = {
    "ders33-v0": ("pv_q_smoothing_mvar", "pv_s_max_mva"),
    "voltage13-v0": ("pv_q_smoothing_kvar", "pv_s_max_kva"),
}


def _saturated_inverters(name):
    """``(env, params, state, action, q_index, available)`` in float64 at the sunniest
    step of the first episode (reset key 0), every inverter rated at 0.98 of the power its
    PV has then: the exact headroom is 0 (ders: the available power is cut to the rating,
    ``p = s_max`` uncurtailed; voltage13, which does not curtail: ``p > s_max``), so the
    exact reactive power is 0 whatever the action asks. ``action`` asks each inverter for
    half its headroom; ``q_index`` indexes its reactive share in the action."""
    env, params = jaxgrid.make(name)
    params = float64_leaves(params)
    _, state = env.reset(jax.random.PRNGKey(0), params)
    action = jnp.zeros(env.action_space(params).shape, jnp.float64)
    if name == "ders33-v0":
        rows = env.slices["pv"]
        q_index = (rows, 1)  # (curtailment 0, reactive share)
        available = jax.vmap(lambda r: env.exogenous(r, params)[2])
    else:
        rows = slice(None)
        q_index = (rows, 0)
        available = jax.vmap(lambda r: env.exogenous(r, params)[1])
    pv = available(state.start + jnp.arange(env.horizon))  # (horizon, n_pv)
    t = int(jnp.argmax(jnp.min(pv, axis=1)))
    assert float(jnp.min(pv[t])) > 0  # every inverter has sun
    _, rating = INVERTERS[name]
    params = params.replace(**{rating: 0.98 * pv[t]})
    state = state.replace(time=jnp.asarray(t, state.time.dtype))
    return env, params, state, action.at[q_index].set(0.5), q_index, pv[t]


def _reactive(env, state):
    """The inverters' reactive power of a step's new state (each environment's name)."""
    return state.pv_q if hasattr(state, "pv_q") else state.q_kvar


@full_only
@pytest.mark.parametrize("name", list(INVERTERS))
def test_inverter_smoothing_zero_is_the_exact_model(name, float64):
    """An explicit width of 0 gives the default step's outputs bit for bit, with the
    exact model's reactive power (0 for a saturated inverter) and its derivative in the
    action (0; both up to rounding at ``p = s``)."""
    env, params, state, action, q_index, _ = _saturated_inverters(name)
    width, rating = INVERTERS[name]
    zero = params.replace(**{width: jnp.float64(0.0)})
    step = jax.jit(env.step_env)
    key = jax.random.PRNGKey(1)
    exact, explicit = step(key, state, action, params), step(key, state, action, zero)
    for x, y in zip(jax.tree_util.tree_leaves(exact), jax.tree_util.tree_leaves(explicit)):
        np.testing.assert_array_equal(x, y)
    # 0, up to the rounding of s^2 - p^2 at p = s (ders): XLA may fuse it into a
    # multiply-add, whose remainder (1e-17 Mvar^2) leaves sqrt of it, 3e-9 Mvar
    tiny = 1e-7 * float(jnp.max(getattr(params, rating)))
    np.testing.assert_allclose(_reactive(env, exact[1]), 0.0, rtol=0, atol=tiny)

    def q_sum(share, p):
        a = action.at[q_index].set(share)
        return jnp.sum(_reactive(env, env.step_env(key, state, a, p)[1]))

    d = jax.grad(q_sum)(jnp.full(action[q_index].shape, 0.5), zero)
    np.testing.assert_allclose(d, 0.0, rtol=0, atol=2 * tiny)


@full_only
@pytest.mark.parametrize("name", list(INVERTERS))
def test_inverter_smoothing_gives_a_derivative_beyond_the_rating(name, float64):
    """With a width, a saturated inverter's reactive power moves with its action: by
    ``clip(a) * sqrt(w^2 softplus((s^2 - p^2) / w^2))`` (``jaxgrid.smooth``), as central
    differences say, and at most ``0.83 w`` (the surrogate's headroom at the rating; ders
    sits there, voltage13 0.02 of its power beyond it: ``0.14 w``)."""
    env, params, state, action, q_index, available = _saturated_inverters(name)
    width, rating = INVERTERS[name]
    w = 0.1 * available  # per inverter: a tenth of its power
    smooth = params.replace(**{width: w})
    key = jax.random.PRNGKey(1)

    def q(share):
        a = action.at[q_index].set(share)
        return _reactive(env, env.step_env(key, state, a, smooth)[1])

    share = jnp.full(action[q_index].shape, 0.5)
    jac = jax.jacfwd(q)(share)
    np.testing.assert_array_equal(jac - jnp.diag(jnp.diag(jac)), 0.0)  # each its own
    analytic = np.asarray(jnp.diag(jac))
    s = getattr(smooth, rating)
    p = jnp.minimum(available, s) if name == "ders33-v0" else available  # ders cuts to s
    by_hand = np.sqrt(w**2 * np.log1p(np.exp((s**2 - p**2) / w**2)))
    np.testing.assert_allclose(analytic, by_hand, rtol=1e-12)
    assert np.all(analytic > 0) and np.all(analytic <= 0.84 * w)
    h = 1e-6
    numeric = (np.asarray(q(share + h)) - np.asarray(q(share - h))) / (2 * h)
    np.testing.assert_allclose(analytic, numeric, rtol=1e-7)


def test_battery_reactive_clip_gradient_on_the_clipped_side(float64):
    """At 1 MW of charge a 1.25 MVA inverter has 0.75 Mvar of headroom; asked for 0.8 Mvar
    the exact model enacts 0.75 whatever the request (derivative 0). With a width the
    enacted q moves with the request (the derivative equals central differences) and
    stays within the smoothed headroom; width 0 is the exact model bit for bit."""
    soc, p = jnp.array([0.5]), jnp.array([1.0])

    def params(width):
        return device_battery(dtype=jnp.float64, q_smoothing_mvar=width)

    def enacted(request, width):
        return battery_step(soc, p, jnp.array([request]), 0.5, params(width)).q_mvar[0]

    assert float(enacted(0.8, 0.0)) == pytest.approx(0.75, rel=1e-12)
    assert float(jax.grad(enacted)(0.8, 0.0)) == 0.0
    default = device_battery(dtype=jnp.float64)
    for request in (-2.0, 0.3, 0.8):
        a = battery_step(soc, p, jnp.array([request]), 0.5, default)
        b = battery_step(soc, p, jnp.array([request]), 0.5, params(0.0))
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)
    for width in (0.1, 0.05):
        analytic = float(jax.grad(enacted)(0.8, width))
        assert analytic > 0.1  # sigmoid(-0.05 / width) of the rounded clip's corner
        assert analytic == pytest.approx(_central(lambda r, w=width: enacted(r, w), 0.8), rel=1e-7)
        assert abs(float(enacted(0.8, width)) - 0.75) <= 2 * width * np.log(2.0)


# -- the data centre's cooling (DataCentreParams.cooling_smoothing_mw) ----------------------

T_OUT, DT = 30.0, 0.5  # test_datacentre's step: a = exp(-0.05), g = 0.975 K/MW


def _cooling(setpoint, width):
    """test_datacentre's step (shares (0.5, 0.3), hall at 22 °C) with the cooling's clip
    smoothed over ``width`` MW; ``(step, q_wanted, drift, g)``, the last three by hand."""
    p = dc_params(cooling_smoothing_mw=width)
    st = dc_state()
    out = dc_step(st, [0.5, 0.3], setpoint, t_out=T_OUT, dt=DT, p=p)
    a, g = thermal_coefficients(DT, p)
    drift = a * st.t_hall + (1 - a) * T_OUT
    return out, out.p_it_mw - (setpoint - drift) / g, drift, g


def _setpoint_for(q_wanted, width):
    """The setpoint (°C) at which the chiller is asked for ``q_wanted`` MW."""
    out, q, drift, g = _cooling(22.0, width)
    return float(drift + g * (out.p_it_mw - q_wanted))


def test_cooling_smoothing_zero_is_the_exact_clip(float64):
    default = dc_params()
    for setpoint in (18.0, 20.0, 22.0, 24.0, 27.0):
        a = dc_step(dc_state(), [0.5, 0.3], setpoint, t_out=T_OUT, dt=DT, p=default)
        b = _cooling(setpoint, 0.0)[0]
        for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
            np.testing.assert_array_equal(x, y)
    # beyond either end of [0, q_max] the exact cooling does not move with the setpoint
    for q in (-0.2, 2.2):
        s = _setpoint_for(q, 0.0)
        assert float(jax.grad(lambda t: _cooling(t, 0.0)[0].q_cool_mw)(s)) == 0.0


@pytest.mark.parametrize("q_wanted", [-0.1, 2.1])  # below 0, above q_max = 2 MW
def test_cooling_gradient_beyond_its_range(q_wanted, float64):
    """Asked for less than 0 or more than ``q_max`` MW, the exact chiller removes 0 or
    ``q_max`` whatever the setpoint; the surrogate's heat removed, the cooling's power
    and the hall temperature move with it, as central differences say, and the hall
    temperature is still the heat balance of the heat removed."""
    for width in (0.1, 0.03):
        s = _setpoint_for(q_wanted, width)
        for field in ("q_cool_mw", "p_cool_mw"):

            def f(t, field=field, width=width):
                return getattr(_cooling(t, width)[0], field)

            analytic = float(jax.grad(f)(s))
            assert abs(analytic) > 1e-3
            assert analytic == pytest.approx(_central(f, s), rel=1e-7)

        def t_next(t, width=width):
            return _cooling(t, width)[0].state.t_hall

        out, _, drift, g = _cooling(s, width)
        # dq/dT_set = -(1/g) soft_clip', dt_next/dT_set = -g dq/dT_set
        d_q = float(jax.grad(lambda t, width=width: _cooling(t, width)[0].q_cool_mw)(s))
        assert float(jax.grad(t_next)(s)) == pytest.approx(-float(g) * d_q, rel=1e-9)
        assert float(jax.grad(t_next)(s)) == pytest.approx(_central(t_next, s), rel=1e-7)
        np.testing.assert_allclose(
            out.state.t_hall, drift + g * (out.p_it_mw - out.q_cool_mw), rtol=1e-14
        )


def test_cooling_surrogate_stays_in_range_and_approaches_the_exact_model(float64):
    setpoints = jnp.linspace(18.0, 27.0, 181)  # q_wanted from about 4.6 down to -4.2 MW

    def sweep(width):
        return jax.vmap(lambda t: _cooling(t, width))(setpoints)

    exact, q_exact, _, _ = sweep(0.0)
    assert float(jnp.min(q_exact)) < -1 and float(jnp.max(q_exact)) > 3  # both ends clipped
    errors = []
    for width in (0.1, 0.01, 0.001):
        out, q, drift, g = sweep(width)
        assert float(jnp.min(out.q_cool_mw)) >= 0 and float(jnp.max(out.q_cool_mw)) <= 2.0
        # the hall within what the chiller can reach: between full and no cooling
        t_next = out.state.t_hall
        assert bool(jnp.all(t_next >= drift + g * (out.p_it_mw - 2.0) - 1e-12))
        assert bool(jnp.all(t_next <= drift + g * out.p_it_mw + 1e-12))
        error = float(jnp.max(jnp.abs(out.q_cool_mw - exact.q_cool_mw)))
        assert error <= width * np.log(2.0) * (1 + 1e-9)  # corners 2 MW apart
        t_error = float(jnp.max(jnp.abs(t_next - exact.state.t_hall)))
        assert t_error <= float(g[0]) * width * np.log(2.0) * (1 + 1e-9)
        errors.append(error)
    assert errors[0] > errors[1] > errors[2]


# -- the diesel's ramp window (DieselParams.smoothing_mw) -----------------------------------

RUNNING = DieselState(running=jnp.array(True), start_left=jnp.array(0, jnp.int32), p_mw=None)


def _running_at(p_mw):
    """A diesel running at ``p_mw``: with test_diesel's ramp (0.6 MW/h, a quarter of an hour)
    its window is ``[max(0.3, p - 0.15), min(p + 0.15, 1)]`` MW."""
    return RUNNING.replace(p_mw=jnp.asarray(p_mw, jnp.float64))


def _diesel(request, width=0.0, commit_width=0.0, state=None, **kw):
    p = diesel_params(smoothing_mw=width, commit_smoothing_mw=commit_width, **kw)
    return diesel_step(_running_at(0.6) if state is None else state, request, 0.25, p)


def test_diesel_smoothing_zero_is_the_exact_model(float64):
    """Explicit widths of 0 give test_diesel's hand-worked runs bit for bit (every field of
    every step), with a zero derivative beyond the ramp window."""
    requests = [0.8, 0.8, 0.8, 0.8, 0.8, 0.1, 0.0, 0.5, -0.2, 0.9]
    default = run_diesel(requests, diesel_params())
    explicit = run_diesel(requests, diesel_params(smoothing_mw=0.0, commit_smoothing_mw=0.0))
    for a, b in zip(default, explicit):
        for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
            np.testing.assert_array_equal(x, y)
    assert float(_diesel(0.8).p_mw) == pytest.approx(0.75, rel=1e-12)
    assert float(jax.grad(lambda r: _diesel(r).p_mw)(0.8)) == 0.0
    assert float(jax.grad(lambda r: _diesel(r).p_mw)(0.35)) == 0.0


@pytest.mark.parametrize("request_mw", [0.8, 0.4])  # above [0.45, 0.75], below it
def test_diesel_gradient_beyond_its_ramp_window(request_mw, float64):
    """Running at 0.6 MW the window is [0.45, 0.75]; asked for 0.8 (or 0.4) the exact unit
    gives 0.75 (0.45) whatever it is asked. With a width the output moves with the
    request, as central differences say, and so do its fuel, cost and emissions."""
    for width in (0.03, 0.01):
        for field in ("p_mw", "cost", "emissions_t"):

            def f(r, field=field, width=width):
                return getattr(_diesel(r, width), field)

            analytic = float(jax.grad(f)(jnp.float64(request_mw)))
            assert abs(analytic) > 1e-4
            assert analytic == pytest.approx(_central(f, request_mw), rel=1e-7)


def test_diesel_window_surrogate_stays_in_the_window_and_approaches_the_exact_model(float64):
    requests = jnp.linspace(0.01, 1.5, 300)  # all committed, across both bounds

    def outputs(width):
        return jax.vmap(lambda r: _diesel(r, width).p_mw)(requests)

    exact = outputs(0.0)
    errors = []
    for width in (0.03, 0.01, 0.001):
        p = outputs(width)
        # within the window (0.6 - 0.15 rounds to 0.44999999999999996: the exact floor)
        assert float(jnp.min(p)) >= float(jnp.min(exact)) and float(jnp.max(p)) <= 0.75
        error = float(jnp.max(jnp.abs(p - exact)))
        assert error <= 2 * width * np.log(2.0)  # two corners 0.3 MW apart
        errors.append(error)
    assert errors[0] > errors[1] > errors[2]
    # a window of one point (ramp below the minimum load: a first running step gives
    # exactly p_min): the surrogate gives that point, as the exact model
    first = diesel_step(
        RUNNING.replace(p_mw=jnp.float64(0.0)),
        jnp.float64(0.9),
        0.25,
        diesel_params(ramp_mw_per_h=0.4, smoothing_mw=0.05),
    )
    assert float(first.p_mw) == pytest.approx(0.3, abs=1e-15)


# -- the diesel's commitment (DieselParams.commit_smoothing_mw) -----------------------------


def test_commitment_relaxation_of_a_running_unit(float64):
    """Running at 0.6 MW, asked for r near 0: the exact unit stops at r <= 0 (output, fuel
    and cost jump to 0 and do not move with r). Relaxed over w, it runs with the weight
    u = sigmoid(r / w): output u * 0.45 (the window's floor), fuel (u F0 p_max + F1 p) dt,
    as worked by hand, with derivatives equal to central differences; its state stays
    the exact one (stopped at r <= 0)."""
    w = 0.05
    for r in (-0.03, -0.01, 0.02):
        out = _diesel(jnp.float64(r), commit_width=w)
        exact = _diesel(jnp.float64(r))
        u = 1 / (1 + np.exp(-r / w))
        assert float(out.p_mw) == pytest.approx(u * 0.45, rel=1e-12)
        fuel = (u * 80.0 * 1.0 + 250.0 * u * 0.45) * 0.25
        assert float(out.fuel_l) == pytest.approx(fuel, rel=1e-12)
        assert float(out.cost) == pytest.approx(fuel * 1.5, rel=1e-12)
        assert bool(out.state.running) == bool(exact.state.running) == (r > 0)
        assert bool(out.producing) == (r > 0) and not bool(out.started)
        for field in ("p_mw", "cost"):

            def f(x, field=field):
                return getattr(_diesel(x, commit_width=w), field)

            analytic = float(jax.grad(f)(jnp.float64(r)))
            assert analytic > 0
            assert analytic == pytest.approx(_central(f, r), rel=1e-7)
        d_cost = u * (1 - u) / w * (80.0 + 250.0 * 0.45) * 0.25 * 1.5
        assert float(jax.grad(lambda x: _diesel(x, commit_width=w).cost)(r)) == pytest.approx(
            d_cost, rel=1e-9
        )
        assert float(jax.grad(lambda x: _diesel(x).cost)(jnp.float64(r))) == 0.0


def test_commitment_relaxation_of_a_start(float64):
    """A unit that is off and asked to run: the start costs u * start_cost. With
    test_diesel's two start-up steps it produces nothing this step either way, and its
    state (starting, two steps left) is the exact one; with no start-up delay it also
    produces u times the clipped request."""
    w, off = 0.05, diesel_off()
    for r in (-0.02, 0.04):
        u = 1 / (1 + np.exp(-r / w))
        out = _diesel(jnp.float64(r), commit_width=w, state=off)
        exact = _diesel(jnp.float64(r), state=off)
        assert float(out.p_mw) == 0.0 and float(out.cost) == pytest.approx(50 * u, rel=1e-12)
        for x, y in zip(
            jax.tree_util.tree_leaves(out.state), jax.tree_util.tree_leaves(exact.state)
        ):
            np.testing.assert_array_equal(x, y)
        f = lambda x: _diesel(x, commit_width=w, state=off).cost  # noqa: E731
        analytic = float(jax.grad(f)(jnp.float64(r)))
        assert analytic == pytest.approx(50 * u * (1 - u) / w, rel=1e-9)
        assert analytic == pytest.approx(_central(f, r), rel=1e-7)
        now = _diesel(jnp.float64(r), commit_width=w, state=off, start_steps=np.int32(0))
        # first step: window [0.3, min(max(0.3, 0.15), 1)] = one point, 0.3 MW
        assert float(now.p_mw) == pytest.approx(u * 0.3, rel=1e-12)
        fuel = (u * 80.0 + 250.0 * u * 0.3) * 0.25
        assert float(now.cost) == pytest.approx(fuel * 1.5 + 50 * u, rel=1e-12)


def test_commitment_relaxation_approaches_the_exact_model_away_from_zero(float64):
    """The relaxed output, fuel and cost are ``u`` (``r > 0``: ``1 - u``) times the exact
    running ones away from the exact: at ten widths or more from a request of 0 within
    sigmoid(-10) = 4.5e-5 of what committing changes."""
    requests = jnp.concatenate([jnp.linspace(-1.0, -0.5, 51), jnp.linspace(0.5, 1.0, 51)])
    for w in (0.05, 0.02):
        bound = 1 / (1 + np.exp(0.5 / w))  # the nearest request is 0.5 MW from 0
        for state in (_running_at(0.6), diesel_off()):
            relaxed = jax.vmap(lambda r, w=w, s=state: _diesel(r, 0.0, w, s))(requests)
            exact = jax.vmap(lambda r, s=state: _diesel(r, state=s))(requests)
            for field in ("p_mw", "fuel_l", "cost"):
                a, b = np.asarray(getattr(relaxed, field)), np.asarray(getattr(exact, field))
                # off (r <= 0) the exact values are 0: what committing changes is the most
                assert np.all(b[:51] == 0)
                assert np.all(np.abs(a - b) <= bound * np.max(np.abs(b)) * (1 + 1e-3))


# -- a regulator agent's tap move (Voltage3Params.tap_smoothing_steps) ----------------------


@full_only
def test_tap_move_surrogate(float64):
    """IEEE 123's seven regulators (steps of 0.00625 pu over [0.9, 1.1]). Width 0: the
    agents' exact move, ``clip(tap + round(steps) * 0.00625, 0.9, 1.1)``, bit for bit, with
    a zero derivative. With a width of w steps the tap moves with the request between
    whole steps (derivative ``tap_step * soft_round'`` away from the range's ends, as
    central differences say), is exact at whole steps, and stays within the range."""
    settings = load_regcontrols("ieee123")
    step = np.asarray(settings.tap_step_pu)
    # row 0 is asked beyond the top of the range; rows 1-6 start 16 steps from either end
    taps = jnp.asarray([1.09375, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0])
    steps = jnp.asarray([4.0, -2.4, 0.3, -2.0, 1.5, 0.0, 2.6])
    exact = jnp.clip(taps + jnp.round(steps) * step, settings.min_tap_pu, settings.max_tap_pu)
    np.testing.assert_array_equal(move_taps(settings, taps, steps), exact)
    np.testing.assert_array_equal(move_taps(settings, taps, steps, 0.0), exact)
    zero = jax.grad(lambda s: jnp.sum(move_taps(settings, taps, s)))(steps)
    assert np.all(np.asarray(zero) == 0)
    between, whole = [1, 2, 4, 6], [3, 5]
    for w in (0.3, 0.1):
        moved = np.asarray(move_taps(settings, taps, steps, w))
        jac = jax.jacfwd(lambda s, w=w: move_taps(settings, taps, s, w))(steps)
        np.testing.assert_array_equal(jac - jnp.diag(jnp.diag(jac)), 0.0)  # each its own
        analytic = np.asarray(jnp.diag(jac))
        assert np.all(analytic > 0)
        r = np.asarray(steps) - np.floor(np.asarray(steps)) - 0.5
        by_hand = step / np.cosh(r / w) ** 2 / (2 * w * np.tanh(0.5 / w))
        np.testing.assert_allclose(analytic[1:], by_hand[1:], rtol=1e-9)
        # central differences between whole steps (at one the staircase is C1, not C2)
        h = 1e-6
        up = move_taps(settings, taps, steps + h, w)
        down = move_taps(settings, taps, steps - h, w)
        numeric = np.asarray(up - down) / (2 * h)
        np.testing.assert_allclose(analytic[between], numeric[between], rtol=1e-6)
        # whole steps exact; within half a step of the request; within the range
        np.testing.assert_allclose(moved[whole], [1.0 - 2 * step[3], 1.0], rtol=0, atol=1e-15)
        target = np.asarray(taps + steps * step)
        assert np.all(np.abs(moved[1:] - target[1:]) <= 0.5 * step[1:] + 1e-15)
        assert np.all(moved >= 0.9) and np.all(moved <= 1.1)
        assert 1.1 - moved[0] <= w * step[0] * np.log(2.0)  # the rounded clip's corner


# -- through a dcmg-v0 step -----------------------------------------------------------------


def _dcmg_float64():
    """``(env, params, state)``: dcmg-v0 in float64, reset at midnight of key 0's day (no
    PV, empty queues, hall at 22 °C, battery at 0.5, diesel off)."""
    env, params = jaxgrid.make("dcmg-v0")
    params = float64_leaves(params)
    _, state = env.reset(jax.random.PRNGKey(0), params)
    return env, params, state


def _dcmg_step(env, state, params, index, value):
    """The step's outputs with the action 0 but ``action[0, index] = value``."""
    action = jnp.zeros((1, 5), jnp.float64).at[0, index].set(value)
    return env.step_env(jax.random.PRNGKey(1), state, action, params)


def _same_steps(a, b):
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        np.testing.assert_array_equal(x, y)


@full_only
def test_dcmg_cooling_smoothing(float64):
    """A setpoint one width above where the hall would drift with no cooling (the idle
    cluster's heat, a night's outdoor air): the exact chiller removes nothing whatever the
    setpoint, so the step's reward does not move with the setpoint action; with
    ``datacentre.cooling_smoothing_mw`` it does (through the cooling's power and the grid
    energy), as central differences say. An explicit 0 is the default step bit for bit."""
    env, params, state = _dcmg_float64()
    dc = params.datacentre
    w = 0.05  # MW, of 2 MW of cooling
    a, g = thermal_coefficients(params.dt_h, dc)
    t_out = env.outdoor_temperature(state.start + state.time, params)
    drift = a * state.datacentre.t_hall + (1 - a) * t_out
    setpoint = drift + g * (dc.p_idle_mw + w)  # the chiller asked for -w MW
    action = (setpoint - dc.t_set_min) / (dc.t_set_max - dc.t_set_min)
    assert 0 < float(action) < 1

    def with_width(width):
        return params.replace(datacentre=dc.replace(cooling_smoothing_mw=width))

    _same_steps(
        _dcmg_step(env, state, params, 2, action),
        _dcmg_step(env, state, with_width(0.0), 2, action),
    )

    def reward(x, width):
        return _dcmg_step(env, state, with_width(width), 2, x)[2][0]

    def cooling(x, width):
        return _dcmg_step(env, state, with_width(width), 2, x)[5]["p_cool_mw"]

    assert float(cooling(action, 0.0)) == 0.0
    assert float(jax.grad(reward)(action, 0.0)) == 0.0
    assert float(jax.grad(cooling)(action, w)) < 0  # a higher setpoint: less cooling
    analytic = float(jax.grad(reward)(action, w))
    assert analytic > 1e-4  # less cooling bought
    assert analytic == pytest.approx(_central(lambda x: reward(x, w), action, 1e-6), rel=1e-6)


@full_only
def test_dcmg_diesel_smoothing(float64):
    """The diesel running at its minimum load (0.3 MW; window [0.3, 0.8] MW with 0.5 MW of
    ramp a step), asked one width beyond the window: the exact step's reward does not move
    with the diesel action; with ``diesel.smoothing_mw`` it does. Asked a hair below 0,
    the exact unit stops (and its reward does not move); with
    ``diesel.commit_smoothing_mw`` the step sees what running would cost and give. Both
    as central differences say; explicit zeros are the default step bit for bit."""
    env, params, state = _dcmg_float64()
    d = params.diesel
    state = state.replace(diesel=_running_at(0.3))
    w = 0.05

    def with_widths(window=0.0, commit=0.0):
        return params.replace(diesel=d.replace(smoothing_mw=window, commit_smoothing_mw=commit))

    for x in (0.85, -0.01):
        _same_steps(
            _dcmg_step(env, state, params, 4, x), _dcmg_step(env, state, with_widths(), 4, x)
        )

    def reward(x, p):
        return _dcmg_step(env, state, p, 4, x)[2][0]

    for x, smooth in ((0.85, with_widths(window=w)), (-0.01, with_widths(commit=w))):
        x = jnp.float64(x)
        assert float(jax.grad(reward)(x, params)) == 0.0
        analytic = float(jax.grad(reward)(x, smooth))
        assert abs(analytic) > 1e-3
        assert analytic == pytest.approx(
            _central(lambda y, s=smooth: reward(y, s), x, 1e-6), rel=1e-6
        )


# -- through a voltage123-reg-v0 step (JAXGRID_VALIDATE=full: a float64 feeder step) --------


@full_only
def test_voltage123_regulator_tap_smoothing(float64):
    """The regulator agents asked for 0.4 of a step each (action 0.1 of 4 steps) at noon:
    the exact taps do not move (round(0.4) = 0), so neither the new taps nor the reward
    move with the regulators' actions. An explicit ``tap_smoothing_steps`` of 0 is the
    default step bit for bit; with 0.2 steps each tap moves by soft_round(0.4) steps, its
    derivative in its own action ``4 tap_step soft_round'(0.4)``, and the reward's
    derivative in the regulators' actions equals central differences."""
    env, params = jaxgrid.make("voltage123-reg-v0")
    params = float64_leaves(params)
    _, state = env.reset(jax.random.PRNGKey(0), params)
    state = state.replace(time=jnp.asarray(48, state.time.dtype))  # noon of 15-minute steps
    n_reg = env.num_agents - env.n_pv
    action = jnp.zeros((env.num_agents, 1), jnp.float64).at[env.n_pv :, 0].set(0.1)
    key = jax.random.PRNGKey(1)
    step = jax.jit(env.step_env)
    zero = params.replace(tap_smoothing_steps=jnp.float64(0.0))
    smooth = params.replace(tap_smoothing_steps=jnp.float64(0.2))
    _same_steps(step(key, state, action, params), step(key, state, action, zero))

    def outputs(reg, p):
        out = env.step_env(key, state, action.at[env.n_pv :, 0].set(reg), p)
        return out[1].tap_pu, jnp.sum(out[2])

    reg = jnp.full((n_reg,), 0.1)
    taps_jac, reward_grad = jax.jit(jax.jacfwd(outputs))(reg, zero)
    assert np.all(np.asarray(taps_jac) == 0) and np.all(np.asarray(reward_grad) == 0)

    taps_jac, reward_grad = jax.jit(jax.jacfwd(outputs))(reg, smooth)
    tap_step = np.asarray(params.regcontrol.tap_step_pu)
    w, r = 0.2, 0.4 - 0.5
    by_hand = 4 * tap_step / np.cosh(r / w) ** 2 / (2 * w * np.tanh(0.5 / w))
    np.testing.assert_allclose(np.diag(np.asarray(taps_jac)), by_hand, rtol=1e-9)
    assert np.any(np.abs(np.asarray(reward_grad)) > 0)
    h = 1e-6
    reward = jax.jit(lambda x: outputs(x, smooth)[1])
    for i in range(n_reg):
        e = jnp.zeros(n_reg).at[i].set(h)
        numeric = float(reward(reg + e) - reward(reg - e)) / (2 * h)
        assert float(reward_grad[i]) == pytest.approx(numeric, rel=1e-5, abs=1e-9)
