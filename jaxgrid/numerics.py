"""Small numerical helpers shared by environments."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxgrid.types import Array

# what jax.default_matmul_precision calls the dtype's full precision
FULL_PRECISION = "highest"


def full_precision(fn):
    """``fn`` with every matrix product it traces in its dtype's full precision.

    XLA's GPU backend runs float32 products in TF32 (a 10-bit mantissa) unless a product
    asks otherwise. On an H200 that made 1-3 % of ``voltage33-v0``'s no-control and droop
    steps fail their power flow, which never fail on a CPU. The sweeps' mismatch cannot
    fall below TF32's rounding. The power-flow solvers, the dispatch and every
    environment's ``reset`` and ``step`` therefore trace their products at full precision.
    The training networks keep the backend's default (or bfloat16, by choice). The
    precision is a trace-time setting (``jax.default_matmul_precision``), so it costs
    nothing on a CPU, where float32 products are full precision anyway. Gradients
    inherit it: a transposed product keeps the precision of the product it came from.
    """

    @functools.wraps(fn)
    def at_full_precision(*args, **kwargs):
        with jax.default_matmul_precision(FULL_PRECISION):
            return fn(*args, **kwargs)

    return at_full_precision


def div_tiny(num: Array, den: Array) -> Array:
    """``num / (den + 1e-299)`` without the float32 underflow of the guard.

    EthicalSmartGrid divides by ``den + 10e-300`` to avoid dividing by zero; in float32 the
    guard underflows to 0 and ``0 / 0`` would give NaN. Here a zero denominator is
    replaced by the smallest normal number of the dtype, which gives 0 for a zero
    numerator and a huge value otherwise, exactly as the guard does in float64.
    """
    den = jnp.asarray(den)
    tiny = jnp.finfo(jnp.result_type(num, den, jnp.float32)).tiny
    return num / jnp.where(den == 0, tiny, den)


def transpose_once(x: Array) -> Array:
    """The transpose of the last two axes of ``x``, computed once.

    Written as an exact product with the identity (``HIGHEST`` precision: no TF32 or
    bfloat16 passes): XLA materialises a product's result, whereas a transpose is
    fused into every consumer and recomputed, with strided reads, in each of them.
    ``x`` must be finite (``0 * inf`` would spread NaN).
    """
    eye = jnp.eye(x.shape[-1], dtype=x.dtype)
    return jnp.einsum("...ac,cb->...ba", x, eye, precision=jax.lax.Precision.HIGHEST)


def sum_last_axis(x: Array) -> Array:
    """``jnp.sum(x, axis=-1)`` as a product with a vector of ones (``HIGHEST`` precision).

    On XLA's CPU backend a sum over a short minor axis fused with its elementwise
    producers runs several times slower than the same terms materialised once and
    multiplied by ones.
    """
    ones = jnp.ones(x.shape[-1], x.dtype)
    return jnp.matmul(x, ones, precision=jax.lax.Precision.HIGHEST)


def one_hot_take(values: Array, index: Array) -> Array:
    """``values[..., index]``: the entries of the last axis of ``values`` ``(..., m)`` at
    ``index`` ``(n,)``, as an exact product with the ``(m, n)`` one-hot matrix of
    ``index`` (``HIGHEST`` precision; ``values`` finite, as validated params are: a
    non-finite entry would spread to every column through ``0 * inf``).

    The lookups of an environment's step (each bus's value of its load profile, each
    agent's of its building profile) are gathers, which XLA's CPU backend runs element by
    element and, under ``vmap``, wrote batch-minor, so that the auto-reset's ``lax.cond``
    transposed them back on every step. Measured with the two compiled in one process and
    their runs alternated on a 2-core CPU, the same numbers out: ``smartgrid-v0`` 1.65 ->
    1.43 ms a step (2048 environments, one XLA device); at 1024 environments over two
    devices (7-11 runs) ``jax.vmap(env.step)`` of ``dso33-v0`` 1.08x, ``evfleet33-v0``
    1.05x, ``voltage13-v0`` 1.06x, ``ders141-v0`` and ``voltage33-v0`` 1.04x.
    """
    one_hot = index[None, :] == jnp.arange(values.shape[-1])[:, None]
    return jnp.matmul(values, one_hot.astype(values.dtype), precision=jax.lax.Precision.HIGHEST)


def inverse_index(index: Array, n: int, fill: int = 0) -> Array:
    """``(n,)`` int32 ``out`` with ``out[index[i]] = i`` for each ``i`` of ``index`` ``(m,)``
    whose entry is in ``range(n)`` (those entries distinct), ``fill`` where none points:
    the inverse of a gather's index (a feeder's bus of each branch to the branch of each
    bus), as a comparison of every pair, ``O(n m)``, instead of a scatter.

    XLA's CPU backend compiles each scatter as a kernel of its own, where the comparison
    fuses with what uses it: with the DistFlow solvers' two inverses written this way
    ``ders33-v0``'s step compiled 5 fewer kernels (``benchmarks/kernel_cost.py``'s count;
    a feeder's topology is params, traced, so they are not constants) and stepped as fast
    (``voltage33-v0`` too: runs alternated with the scatters'). Where the inverse
    only places values (``out[index] = values``) a scatter stays smaller: the bus
    voltages of :func:`~jaxgrid.grid.distflow_newton.distflow_newton` gathered through
    it compiled 4 kernels more."""
    hit = jnp.asarray(index)[None, :] == jnp.arange(n)[:, None]
    position = jnp.arange(1, hit.shape[1] + 1, dtype=jnp.int32)
    found = jnp.sum(jnp.where(hit, position, 0), axis=1)  # 1 + i, or 0 where none
    return jnp.where(found > 0, found - 1, fill).astype(jnp.int32)


MAX_RANDOM_RANGE = 2**16  # the largest n of index_from_bits, exclusive


def index_from_bits(bits: Array, n: int) -> Array:
    """uint32 index uniform on ``range(n)`` (a static ``1 <= n < 2**16``) from uint32
    random ``bits`` (any shape; one draw of 32 bits an index): ``floor(bits * n / 2**32)``
    (Lemire's multiply-shift; each index's probability is within ``1 / 2**32`` of ``1 /
    n``), :func:`scaled_bits` with ``n`` checked.

    ``jax.random.choice`` and ``randint`` split the key and draw 64 bits (they serve ranges
    up to ``2**32``): three Threefry hashes, each a rolled loop of its own kernels, which
    every environment's step compiles for its auto-reset's start day. Drawn this way the
    steps of ``tso14-v0`` and ``voltage33-v0`` had 7 and 6 fewer of the kernels XLA
    generates code for (368 -> 361, 252 -> 246) and ``tso14-v0`` 4 % less optimised LLVM IR
    (``benchmarks/kernel_cost.py``'s count, the dumped modules' sizes); the bits may come
    from one draw with a reset's other random numbers (:func:`unit_floats`).
    """
    n = int(n)
    if not 1 <= n < MAX_RANDOM_RANGE:
        raise ValueError(f"an index is drawn from 1 to {MAX_RANDOM_RANGE - 1} values, got {n}")
    return scaled_bits(bits, n)


def scaled_bits(bits: Array, n) -> Array:
    """uint32 random ``bits`` (any shape) mapped onto ``range(n)``: ``floor(bits * n /
    2**32)``, uint32, with ``n`` (broadcast with ``bits``) from 1 to ``2**16 - 1``
    (:func:`index_from_bits`; beyond that range the result is wrong, so callers validate
    it: one draw of bits then serves several ranges)."""
    size = jnp.asarray(n).astype(jnp.uint32)
    # bits * n = 2**16 * (high * n) + low * n, each product below 2**32
    high, low = bits >> 16, bits & 0xFFFF
    return (high * size + ((low * size) >> 16)) >> 16


def unit_floats(bits: Array) -> Array:
    """float32 in ``[0, 1)`` from uint32 random ``bits`` (any shape), as
    ``jax.random.uniform`` makes its float32: the top 23 bits as the mantissa of a number
    in ``[1, 2)``, less 1. So that one draw of bits serves an integer and floats
    (:func:`scaled_bits`) where each draw of its own is a Threefry hash, a rolled loop of
    kernels. 23 bits of resolution in float64 too."""
    one = jnp.uint32(0x3F800000)  # the bits of float32 1.0
    return jax.lax.bitcast_convert_type((bits >> 9) | one, jnp.float32) - 1.0


def standard_normals(bits: Array) -> Array:
    """float32 standard normal draws from uint32 random ``bits`` (any shape), as
    ``jax.random.normal`` makes them, bit for bit: ``sqrt(2) erfinv(u)`` of ``u`` uniform
    on the open ``(-1, 1)`` (:func:`unit_floats` scaled)."""
    low = jnp.nextafter(jnp.float32(-1.0), jnp.float32(0.0))
    u = jnp.maximum(low, unit_floats(bits) * (1.0 - low) + low)
    return jnp.sqrt(jnp.float32(2.0)) * jax.lax.erf_inv(u)


# Cephes' atanf (Moshier): atan(u) = u + u^3 P(u^2) on |u| <= tan(pi/8), relative error
# below 2e-7 there
_ATAN_COEFFICIENTS = (8.05374449538e-2, -1.38776856032e-1, 1.99777106478e-1, -3.33329491539e-1)
_TAN_PI_8 = 0.41421356237309503


@jax.custom_jvp
def arctan2(y: Array, x: Array) -> Array:
    """``jnp.arctan2(y, x)`` (radians, in ``[-pi, pi]``), in float32 as a polynomial of
    vectorised arithmetic.

    XLA's CPU backend evaluates float32 ``atan2`` element by element: 12 ns an element
    against 0.3 ns for ``exp`` (this 2-core CPU, 285k elements), so the angles of IEEE
    123's 278 nodes took a tenth of a batched three-phase power flow. Here the ratio of
    the smaller to the larger of ``|x|, |y|`` is reduced to ``|u| <= tan(pi/8)`` and
    Cephes' ``atanf`` polynomial applied, then the octant restored: within 3e-7 rad of
    float64's ``arctan2`` (``tests/test_numerics.py``). Other dtypes take
    ``jnp.arctan2``. ``arctan2(0, 0)`` is 0; the sign of a zero ``x`` is ignored. The
    derivative is the exact one, ``(x dy - y dx) / (x^2 + y^2)``."""
    y, x = jnp.asarray(y), jnp.asarray(x)
    if jnp.result_type(y, x) != jnp.float32:
        return jnp.arctan2(y, x)
    ax, ay = jnp.abs(x), jnp.abs(y)
    big, small = jnp.maximum(ax, ay), jnp.minimum(ax, ay)
    t = small / jnp.where(big > 0, big, 1.0)  # in [0, 1]
    reduced = t > _TAN_PI_8
    u = jnp.where(reduced, (t - 1.0) / (t + 1.0), t)
    z = u * u
    c0, c1, c2, c3 = _ATAN_COEFFICIENTS
    angle = (((c0 * z + c1) * z + c2) * z + c3) * z * u + u
    angle = jnp.where(reduced, angle + np.pi / 4, angle)
    angle = jnp.where(ay > ax, np.pi / 2 - angle, angle)
    angle = jnp.where(x < 0, np.pi - angle, angle)
    return jnp.where(jnp.signbit(y), -angle, angle)


@arctan2.defjvp
def _arctan2_jvp(primals, tangents):
    y, x = primals
    dy, dx = tangents
    r2 = x * x + y * y
    safe = jnp.where(r2 > 0, r2, 1.0)
    return arctan2(y, x), jnp.where(r2 > 0, (x * dy - y * dx) / safe, 0.0)


def angle(z: Array) -> Array:
    """``jnp.angle(z)`` (radians) by :func:`arctan2`."""
    return arctan2(jnp.imag(z), jnp.real(z))


def interp_unit(x: Array, low, high) -> Array:
    """``np.interp(x, (low, high), (0, 1))``: linear map of ``[low, high]`` to ``[0, 1]``, clamped."""
    return jnp.clip((x - low) * (1.0 / (high - low)), 0.0, 1.0)


@functools.cache
def sorting_network(n: int) -> tuple[tuple[int, int], ...]:
    """Comparators ``(i, j)``, ``i < j``, of Batcher's odd-even merge sort for ``n`` values.

    Built for the next power of two; comparators that touch the padding are dropped,
    which is exact because padding with ``+inf`` would never move.
    """
    size = 1
    while size < n:
        size *= 2
    pairs = []
    p = 1
    while p < size:
        k = p
        while k >= 1:
            for j in range(k % p, size - k, 2 * k):
                for i in range(min(k, size - j - k)):
                    a, b = i + j, i + j + k
                    if a // (2 * p) == b // (2 * p) and b < n:
                        pairs.append((a, b))
            k //= 2
        p *= 2
    return tuple(pairs)


def sort_last_axis(values: Array) -> Array:
    """``jnp.sort(values, axis=-1)`` by a sorting network of min/max operations.

    For tens of entries under ``vmap`` this is several times cheaper than a sort: every
    comparator is one elementwise min and max across the batch.
    """
    n = values.shape[-1]
    cols = [values[..., i] for i in range(n)]
    for i, j in sorting_network(n):
        cols[i], cols[j] = jnp.minimum(cols[i], cols[j]), jnp.maximum(cols[i], cols[j])
    return jnp.stack(cols, axis=-1)


def median(values: Array) -> Array:
    """``np.median`` over the last axis (the mean of the two middle values for even ``n``).

    Up to 32 values, the two middle ones of :func:`sort_last_axis`'s network (XLA fuses
    the network into each consumer of the median: ``smartgrid33-v0``'s step holds it
    three times). Above 32, the lower middle one by :func:`order_statistic` and the
    upper one as the least value above it where fewer than ``n // 2 + 1`` are at or
    below it: the network's min/max operations grow as ``n log^2 n``, and XLA compiles
    each into every consumer. Measured under ``jax.vmap(env.step)`` on this 2-core CPU,
    fresh processes alternated: ``smartgrid-medium-v0`` (100 agents, 1024 environments)
    compiled in 1.7-2.0 s instead of 4.6-5.1 s and stepped as fast (2.8-3.1e5
    env-steps/s against 2.6-3.3e5); at 26 values (``smartgrid-v0``, 4096 environments)
    the bisection stepped at 0.9-1.3e6 against the network's 1.4-1.6e6.
    """
    n = values.shape[-1]
    if n > 32:
        low = order_statistic(values, (n - 1) // 2)
        at_or_below = jnp.sum(values <= low[..., None], axis=-1)
        above = jnp.min(jnp.where(values > low[..., None], values, jnp.inf), axis=-1)
        return (low + jnp.where(at_or_below > n // 2, low, above)) * 0.5
    ordered = sort_last_axis(values)
    middle = jnp.stack([ordered[..., (n - 1) // 2], ordered[..., n // 2]], axis=-1)
    return jnp.sum(middle, axis=-1) * 0.5


def order_statistic(values: Array, rank: int) -> Array:
    """``jnp.sort(values, axis=-1)[..., rank]`` (float32 or float64 ``values``, a static
    ``rank``) by bisection on the values' bit patterns: each float mapped to an integer
    of the same order (negative ones' magnitude bits flipped), and the least integer
    with more than ``rank`` values at or below it found in one halving of the integer
    range per bit (32 or 64 steps of a rolled ``lax.fori_loop``, each a count over the
    last axis). Exact: the result is one of ``values``, bit for bit."""
    bits = jnp.finfo(values.dtype).bits
    itype = jnp.int32 if bits == 32 else jnp.int64
    top = jnp.iinfo(itype).max
    raw = jax.lax.bitcast_convert_type(values, itype)
    keys = jnp.where(raw < 0, raw ^ top, raw)
    lo = jnp.full(values.shape[:-1], jnp.iinfo(itype).min, itype)
    hi = jnp.full_like(lo, top)

    def halve(_, bounds):
        lo, hi = bounds
        mid = (lo >> 1) + (hi >> 1) + (lo & hi & 1)  # no overflow
        enough = jnp.sum(keys <= mid[..., None], axis=-1, dtype=itype) > rank
        return jnp.where(enough, lo, mid + 1), jnp.where(enough, mid, hi)

    lo, _ = jax.lax.fori_loop(0, bits, halve, (lo, hi))
    return jax.lax.bitcast_convert_type(jnp.where(lo < 0, lo ^ top, lo), values.dtype)


def gauss_jordan_inverse(a: Array) -> Array:
    """The inverse of a small square matrix ``a`` ``(n, n)`` (real or complex) by
    Gauss-Jordan elimination with partial pivoting, written in JAX operations: ``n``
    steps of a ``lax.fori_loop``, each a row swap (by masks, not a scatter) and a rank-1
    update of the ``(n, 2n)`` augmented matrix; ``2 n^3`` multiply-adds.

    Why not ``jnp.linalg.inv``: jaxlib 0.10's CPU LAPACK kernels hand a large enough
    batch's chunks to XLA's thread pool and block their own pool thread until the chunks
    are done, so inside a loop on a CPU split into host devices they can wait for each
    other for ever (``jaxgrid/_xla_flags.py``). For the few small inverses of an
    environment's step (the regulators' 18 x 18 tap system of IEEE 123) these operations
    batch under ``vmap`` without LAPACK and differentiate as any JAX program does (the
    pivot choice is piecewise constant); measured against ``jnp.linalg.inv`` in one
    process, ``voltage123-v0`` stepped 3 % slower at 256 environments on a 2-core CPU.
    """
    n = a.shape[-1]
    rows = jnp.arange(n)
    augmented = jnp.concatenate([a, jnp.eye(n, dtype=a.dtype)], axis=-1)

    def eliminate(k, m):
        column = jnp.abs(m[:, k])
        pivot = jnp.argmax(jnp.where(rows >= k, column, -1.0))
        row_k, row_pivot = m[k], m[pivot]
        m = jnp.where(
            (rows == k)[:, None], row_pivot, jnp.where((rows == pivot)[:, None], row_k, m)
        )
        row = m[k] / m[k, k]
        factor = jnp.where(rows == k, 0.0, m[:, k])
        return jnp.where((rows == k)[:, None], row, m - factor[:, None] * row)

    return jax.lax.fori_loop(0, n, eliminate, augmented)[:, n:]


def positive_definite_solve(a: Array, b: Array) -> Array:
    """``x`` ``(n,)`` with ``a @ x = b`` for a small symmetric positive definite ``a``
    ``(n, n)``: Gauss-Jordan elimination of ``[a | b]`` without pivoting on a CPU (a
    positive definite matrix keeps its pivots positive, as its Cholesky factor does;
    ``n`` steps of a ``lax.fori_loop``, each a rank-1 update of the ``(n, n + 1)``
    augmented matrix), ``jnp.linalg.solve`` on other platforms.

    Why not :func:`small_inverse` and a product: the inverse eliminates ``n`` columns of
    the identity beside ``a`` and searches each step's pivot, the solve one column and no
    search; in the binding lines' Newton steps (:mod:`jaxgrid.dispatch.binding_lines`,
    5 x 5 systems, one per direction) the inverse's loop took about a tenth of the
    stage's kernel time (``jax.profiler``, 64 ``tso118-v0`` problems on a 2-core CPU). A
    zero pivot (a singular ``a``) gives non-finite entries, for the caller to test; an
    indefinite ``a`` gives a finite ``x`` that need not solve the system."""

    def eliminate(augmented):
        n = augmented.shape[0]
        rows = jnp.arange(n)

        def step(k, m):
            row = m[k] / m[k, k]
            factor = jnp.where(rows == k, 0.0, m[:, k])
            return jnp.where((rows == k)[:, None], row, m - factor[:, None] * row)

        return jax.lax.fori_loop(0, n, step, augmented)[:, n]

    augmented = jnp.concatenate([a, b[:, None]], axis=-1)
    return jax.lax.platform_dependent(
        augmented, cpu=eliminate, default=lambda m: jnp.linalg.solve(m[:, :-1], m[:, -1])
    )


def small_inverse(a: Array) -> Array:
    """``a``'s inverse ``(n, n)``: :func:`gauss_jordan_inverse` on a CPU, where jaxlib
    0.10's batched LAPACK kernels can deadlock a split CPU, and ``jnp.linalg.inv`` (the
    vendor's batched solver) on other platforms, whose LAPACK-free alternative would
    be ``n`` sequential loop iterations of tiny kernels. Chosen when the program is
    lowered (``jax.lax.platform_dependent``), so one traced function serves both."""
    return jax.lax.platform_dependent(a, cpu=gauss_jordan_inverse, default=jnp.linalg.inv)


def skip_zero(nonzero: Array, fn, *args):
    """``fn(*args)``, computed only where the scalar bool ``nonzero`` holds: where it does
    not, the caller knows ``fn``'s value is zero (the port solver's tap terms at the taps
    it was built at), and zeros of its output's shapes are returned.

    A plain ``jax.lax.cond`` does this unbatched, but under ``vmap`` with a batched
    ``nonzero`` it runs both branches with every operand broadcast to the batch:
    ``fn``'s unbatched matrices became per-member copies and its matrix products batched
    matrix-vector products (an IEEE 123 port Z-bus sweep of 1024 solves with their own
    taps ran 2.6x slower on this CPU). Here the batching rule makes one decision for the
    batch: with ``nonzero`` unbatched, one ``cond`` whose branch is ``fn`` batched over
    the batched ``args``; with ``nonzero`` batched, the same ``cond`` on whether any
    member needs ``fn``, whose branch runs ``fn`` over the batch and selects. ``fn``
    must close over no traced value (pass those in ``args``, arrays or pytrees of them);
    its outputs are arrays or pytrees of them. Differentiated (forward or reverse),
    ``fn`` and its derivatives are computed everywhere, without the skip: a term that
    is zero at a point need not have a zero derivative there.
    """
    return _skip_zero(fn, nonzero, *args)


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def _skip_zero(fn, pred, *args):
    """:func:`skip_zero` without its derivative rule (a ``custom_vmap`` has no
    transpose)."""

    def zeros(*operands):
        return jax.tree.map(jnp.zeros_like, fn(*operands))

    @jax.custom_batching.custom_vmap
    def run(pred, *operands):
        return jax.lax.cond(pred, fn, zeros, *operands)

    @run.def_vmap
    def batched(axis_size, in_batched, pred, *operands):
        pred_batched, *operands_batched = in_batched
        in_axes = [jax.tree.map(lambda b: 0 if b else None, b) for b in operands_batched]
        over_batch = jax.vmap(fn, in_axes=in_axes, axis_size=axis_size)
        if pred_batched:  # one decision still: skipped where no member needs fn

            def selected(*o):
                return _where(pred, over_batch(*o))

            out = jax.lax.cond(
                jnp.any(pred),
                selected,
                lambda *o: jax.tree.map(jnp.zeros_like, selected(*o)),
                *operands,
            )
        else:
            out = jax.lax.cond(
                pred, over_batch, lambda *o: jax.tree.map(jnp.zeros_like, over_batch(*o)), *operands
            )
        return out, jax.tree.map(lambda _: True, out)

    return run(pred, *args)


@_skip_zero.defjvp
def _skip_zero_jvp(fn, primals, tangents):
    # fn itself, once: its value where it is skipped is zero by the caller's word
    _, *args = primals
    _, *arg_tangents = tangents
    return jax.jvp(fn, tuple(args), tuple(arg_tangents))


def _where(pred: Array, tree):
    """Each leaf of ``tree`` where ``pred`` (``()``, or ``(batch,)`` for leaves with a
    leading batch axis) holds, zero elsewhere."""
    return jax.tree.map(
        lambda y: jnp.where(
            jnp.reshape(pred, jnp.shape(pred) + (1,) * (y.ndim - jnp.ndim(pred))), y, 0
        ),
        tree,
    )
