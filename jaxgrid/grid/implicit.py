"""Derivatives of a power-flow solution by the implicit function theorem, not the iterations.

A solver that runs a fixed number of iterations to the root ``z*`` of ``F(z, theta) = 0``
(the DistFlow sweep's fixed point, the Newton residuals, the three-phase fixed points in
real and imaginary parts, the DC-OPF's KKT conditions) is differentiated at that root:
``dz*/dtheta = -(dF/dz)^{-1} dF/dtheta`` (forward) and its transpose (reverse), through
``jax.lax.custom_root``. Backpropagating through the iterations instead costs memory
and time per iteration and gives the derivative of the truncated iteration, which moves
with the iteration count; at a converged solution the implicit derivative is that of the
solution itself and does not.

The linear solves are dense (``jnp.linalg.solve`` on the Jacobian of ``F`` in ``z``,
built by forward mode): the unknowns number a few per bus (99 for case33bw's sweep, 4 per
branch slot for Newton), so the Jacobian is small, and ``lineax``/``optimistix`` are not
among the package's dependencies for one dense solve.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from jaxgrid.types import Array, PyTree


def dense_tangent_solve(linear: Callable, rhs: PyTree) -> PyTree:
    """``x`` with ``linear(x) = rhs`` for a linear map on pytrees, by a dense LU solve of
    its matrix (a ``tangent_solve`` for ``jax.lax.custom_root``; reverse mode
    transposes ``jnp.linalg.solve`` in ``rhs``)."""
    flat, unravel = ravel_pytree(rhs)
    matrix = jax.jacfwd(lambda x: ravel_pytree(linear(unravel(x)))[0])(jnp.zeros_like(flat))
    return unravel(jnp.linalg.solve(matrix, flat))


def guarded_tangent_solve(linear: Callable, rhs: PyTree) -> PyTree:
    """:func:`dense_tangent_solve`, but 0 where the matrix is singular to working
    precision (an LU pivot below ``n eps`` times the largest, ``n`` unknowns), instead of
    the infinities or noise of a solve through a zero pivot: the solution is then not
    locally unique in the parameters (a degenerate optimum) and has no derivative. The
    test depends on the matrix alone, so the map stays linear in ``rhs`` and transposes
    for reverse mode."""
    flat, unravel = ravel_pytree(rhs)
    matrix = jax.jacfwd(lambda x: ravel_pytree(linear(unravel(x)))[0])(jnp.zeros_like(flat))
    lu, pivots = jax.scipy.linalg.lu_factor(matrix)
    size = jnp.abs(jnp.diagonal(lu))
    regular = jnp.min(size) > flat.shape[0] * jnp.finfo(flat.dtype).eps * jnp.max(size)
    solution = jax.scipy.linalg.lu_solve((lu, pivots), flat)
    return unravel(jnp.where(regular, solution, 0.0))


def active_set_complementarity(dual: Array, slack: Array, on: Array) -> Array:
    """The complementarity equation of an inequality ``slack >= 0`` with multiplier
    ``dual >= 0`` in a KKT system written for :func:`implicit_root`: ``min(dual, slack)``
    where the inequality is switched on (``on``), ``dual`` where it is not (its dual
    stays 0). Written with ``min`` rather than the product ``dual * slack``, the tangent
    system is that of the active set: a constraint whose slack the solver left below its
    dual keeps its slack at 0 (it stays binding), any other keeps its dual at 0."""
    return jnp.where(on, jnp.minimum(dual, slack), dual)


def implicit_root(
    residual: Callable,
    initial: PyTree,
    iterate: Callable,
    has_aux: bool = False,
    tangent_solve: Callable = dense_tangent_solve,
) -> PyTree:
    """``iterate(initial)`` (the solver's own iterations, run as they are, so the solution
    is bit for bit the solver's), differentiated as the root of ``residual`` (a function of
    the unknowns whose closed-over values are the parameters) by the implicit function
    theorem. With ``has_aux``, ``iterate`` returns ``(solution, aux)`` and so does this;
    ``aux`` is not differentiated, and its bool and integer leaves (flags, iteration
    counts) come back in their own dtype (``custom_root`` itself takes float or complex
    aux only: they pass through it as floats, exact for counts below 2^24).
    ``tangent_solve`` solves the linearised equations (default :func:`dense_tangent_solve`;
    :func:`guarded_tangent_solve` returns 0 where they are singular)."""
    if not has_aux:
        return jax.lax.custom_root(residual, initial, lambda _, z: iterate(z), tangent_solve)
    aux_dtypes = []  # recorded when custom_root traces iterate_float_aux

    def iterate_float_aux(_, z):
        solution, aux = iterate(z)
        aux_dtypes.append(jax.tree_util.tree_map(jnp.result_type, aux))
        return solution, jax.tree_util.tree_map(_as_float, aux)

    solution, aux = jax.lax.custom_root(
        residual, initial, iterate_float_aux, tangent_solve, has_aux=True
    )
    return solution, jax.tree_util.tree_map(_from_float, aux, aux_dtypes[-1])


def _as_float(value: Array) -> Array:
    """``value``, a bool or integer as a float (custom_root's aux must be inexact)."""
    if jnp.issubdtype(jnp.result_type(value), jnp.inexact):
        return value
    return jnp.asarray(value, jnp.result_type(float))


def _from_float(value: Array, dtype) -> Array:
    """``value`` back in ``dtype`` after :func:`_as_float`."""
    if jnp.issubdtype(dtype, jnp.inexact):
        return value
    if jnp.issubdtype(dtype, jnp.bool_):
        return value > 0.5
    return jnp.round(value).astype(dtype)


def implicit_complex_fixed_point(
    step: Callable,
    iterate: Callable,
    like: Array,
    has_aux: bool = False,
    tangent_solve: Callable = guarded_tangent_solve,
) -> PyTree:
    """``iterate()`` (returns complex voltages ``v`` shaped as ``like``, with ``aux`` when
    ``has_aux``), differentiated as the fixed point ``v = step(v)``. ``custom_root``'s
    unknowns are ``v``'s real and imaginary parts, since ``step`` need not be holomorphic
    (load models with ``conj`` and ``|v|``); the solution is ``iterate``'s bit for bit.
    The default tangent solve returns 0 where ``1 - d step / d v`` is singular or not
    finite (an iteration that diverged, whose caller substitutes another solution)."""
    real = jnp.real(like).dtype

    def residual(parts):
        new = step(jax.lax.complex(*parts))
        return jnp.real(new) - parts[0], jnp.imag(new) - parts[1]

    def run(_):
        out = iterate()
        v, aux = out if has_aux else (out, None)
        parts = (jnp.real(v), jnp.imag(v))
        return (parts, aux) if has_aux else parts

    zero = jnp.zeros(jnp.shape(like), real)
    out = implicit_root(residual, (zero, zero), run, has_aux=has_aux, tangent_solve=tangent_solve)
    if has_aux:
        (re, im), aux = out
        return jax.lax.complex(re, im), aux
    return jax.lax.complex(*out)
