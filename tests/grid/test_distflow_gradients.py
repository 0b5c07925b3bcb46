"""Derivatives of the DistFlow solvers at their solution (implicit function theorem):
equal to central finite differences in float64, and independent of the iteration count
once the solve has converged."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import float64_leaves, sampled, x64

from jaxgrid.grid import case33bw
from jaxgrid.grid.distflow import distflow
from jaxgrid.grid.distflow_newton import distflow_newton
from jaxgrid.grid.fallback import distflow_with_fallback

SOLVERS = {
    "sweep": lambda feeder, p, q, n: distflow(feeder, p, q, iterations=n),
    "newton": lambda feeder, p, q, n: distflow_newton(feeder, p, q, iterations=n),
    "fallback": lambda feeder, p, q, n: distflow_with_fallback(feeder, p, q, sweeps=n),
}
# a converged solve with few iterations, and many; the largest gradient difference allowed
# relative to the largest entry. Measured on this problem: after 8 sweeps the implicit
# gradient is 1.9e-10 from that after 40 (the solution itself moved that much), the
# derivative of the 8 unrolled sweeps 1.3e-9; Newton converges quadratically either way.
ITERATIONS = {"sweep": (8, 40), "newton": (3, 9), "fallback": (8, 40)}
AGREE = {"sweep": 5e-10, "newton": 1e-13, "fallback": 5e-10}


def _problem():
    """case33bw at 1.3x load (float64), a random weighting of the outputs and directions."""
    feeder = float64_leaves(case33bw())
    p, q = 1.3 * feeder.p_load_mw, 1.3 * feeder.q_load_mvar
    w = jax.random.normal(jax.random.PRNGKey(0), (feeder.n_bus,), jnp.float64)
    return feeder, p, q, w


def _scalar(solver, iterations, feeder, w):
    """A weighted sum of the solution's voltages, losses and flows, of loads and r."""

    def f(p, q, r_pu):
        result = SOLVERS[solver](feeder.replace(r_pu=r_pu), p, q, iterations)
        return jnp.sum(w * result.vm_pu) + result.loss_mw + jnp.sum(result.p_branch_mw[:3])

    return f


@pytest.mark.parametrize("solver", sampled(SOLVERS, keep=("newton",)))
def test_gradient_equals_central_differences(solver):
    with x64():
        feeder, p, q, w = _problem()
        f = jax.jit(_scalar(solver, ITERATIONS[solver][0], feeder, w))
        args = (p, q, feeder.r_pu)
        assert bool(SOLVERS[solver](feeder, p, q, ITERATIONS[solver][0]).converged)
        grads = jax.grad(f, argnums=(0, 1, 2))(*args)
        for i, (x, g) in enumerate(zip(args, grads)):
            d = jax.random.normal(jax.random.PRNGKey(i + 1), x.shape, jnp.float64) * (
                jnp.abs(x) + 1e-3
            )
            h = 1e-6
            up = [a + h * d if j == i else a for j, a in enumerate(args)]
            down = [a - h * d if j == i else a for j, a in enumerate(args)]
            numeric = float(f(*up) - f(*down)) / (2 * h)
            analytic = float(jnp.sum(g * d))
            assert analytic == pytest.approx(numeric, rel=1e-5), (i, analytic, numeric)


@pytest.mark.parametrize("solver", sampled(SOLVERS, keep=("newton",)))
def test_gradient_does_not_depend_on_the_iteration_count(solver):
    with x64():
        feeder, p, q, w = _problem()
        grads = []
        for n in ITERATIONS[solver]:
            f = _scalar(solver, n, feeder, w)
            grads.append(np.asarray(jax.jit(jax.grad(f, argnums=(0, 2)))(p, q, feeder.r_pu)[0]))
        assert np.max(np.abs(grads[0] - grads[1])) <= AGREE[solver] * np.max(np.abs(grads[1]))
