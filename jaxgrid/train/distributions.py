"""Action distributions for bounded continuous and masked discrete actions (distrax).

- ``beta``: a Beta per action entry, scaled to ``[low, high]``; entries with
  ``low == high`` (masked) are fixed and carry no probability mass or entropy. Its
  log-probability and entropy are written here (:func:`beta_log_prob`,
  :func:`beta_entropy`: distrax's formulas, with each special function applied once to
  ``(alpha, beta, alpha + beta)`` stacked), and its two Gamma draws share one rejection
  loop: distrax's Beta evaluates ``lgamma`` and ``digamma`` three times each, and their
  gradients as many times again, each its own XLA kernel; with both changes PPO's update
  on ``arbitrage-v0`` compiles to 520 XLA fusions instead of 604, and IPPO's on
  ``voltage33-v0`` to 1032 instead of 1100: 8 % and 6 % less trace and compile time (old
  and new alternated in one process, median of 4 and 3).
- ``gaussian``: a diagonal Gaussian with a state-independent log standard deviation, in
  units of the box's half-range centred on its middle: the raw sample is clipped to
  ``[-1, 1]`` and mapped onto ``[low, high]``; the log-probability is of the raw sample
  (as in PureJaxRL). Much cheaper to sample and differentiate than the Beta.
- ``tanh_gaussian``: SAC's squashed Gaussian (Haarnoja et al. 2018, appendix C): a
  diagonal Gaussian whose mean and log standard deviation (bounded to
  ``[LOG_STD_MIN, LOG_STD_MAX]``) both come from the network, squashed by ``tanh`` into
  ``[-1, 1]`` and mapped onto ``[low, high]``; the log-probability of the raw draw includes
  the squashing's ``-sum log(1 - tanh(raw)^2)``, and the draw is reparameterised (its
  gradient flows into the network's outputs).
- ``categorical``: logits with an optional mask of allowed choices.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import distrax
import jax
import jax.numpy as jnp

from jaxgrid.types import Array

LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0  # bounds of the squashed Gaussian's log std


class BoundedPolicy(NamedTuple):
    """Distribution over actions ``(..., n_agents, act_dim)`` within ``[low, high]``."""

    kind: str
    params: Array  # raw network output (..., n_agents, n_out)
    log_std: Array | None
    low: Array
    high: Array

    def _free(self):
        return self.high > self.low

    def _base(self):
        if self.kind == "tanh_gaussian":
            mean, log_std = self._mean_log_std()
            return distrax.Normal(mean, jnp.exp(log_std))
        return distrax.Normal(self.params, jnp.exp(self.log_std))

    def _mean_log_std(self):
        """The squashed Gaussian's mean and log std, the latter smoothly within bounds."""
        mean, raw_log_std = jnp.split(self.params, 2, axis=-1)
        span = LOG_STD_MAX - LOG_STD_MIN
        return mean, LOG_STD_MIN + 0.5 * span * (jnp.tanh(raw_log_std) + 1.0)

    def _concentrations(self):
        a, b = jnp.split(self.params, 2, axis=-1)
        return jax.nn.softplus(a) + 1.0, jax.nn.softplus(b) + 1.0

    def sample(self, key) -> Array:
        """``(action, raw)``: an action in the box and the raw draw its log-probability needs."""
        if self.kind == "beta":
            raw = sample_beta(key, *self._concentrations())
        elif self.kind == "tanh_gaussian":
            mean, log_std = self._mean_log_std()
            raw = mean + jnp.exp(log_std) * flat_draw(
                jax.random.normal, key, mean.shape, mean.dtype
            )
        else:
            noise = flat_draw(jax.random.normal, key, self.params.shape, self.params.dtype)
            raw = self.params + jnp.exp(self.log_std) * noise
        return self.to_action(raw), raw

    def to_action(self, raw: Array) -> Array:
        """A raw draw (Beta in [0, 1], Gaussian in half-range units, squashed Gaussian
        before its ``tanh``) mapped into the box."""
        if self.kind == "beta":
            return self.low + (self.high - self.low) * raw
        if self.kind == "tanh_gaussian":
            return self.low + (self.high - self.low) * (jnp.tanh(raw) + 1.0) / 2.0
        return self.low + (self.high - self.low) * (jnp.clip(raw, -1.0, 1.0) + 1.0) / 2.0

    def log_prob(self, raw: Array) -> Array:
        """Log-probability of a raw sample, summed over free action entries: ``(..., n_agents)``."""
        if self.kind == "beta":
            lp = beta_log_prob(jnp.clip(raw, 1e-6, 1.0 - 1e-6), *self._concentrations())
        else:
            lp = self._base().log_prob(raw)
        if self.kind == "tanh_gaussian":  # log |d tanh(raw) / d raw|, in a stable form
            lp = lp - 2.0 * (math.log(2.0) - raw - jax.nn.softplus(-2.0 * raw))
        return jnp.sum(jnp.where(self._free(), lp, 0.0), axis=-1)

    def entropy(self) -> Array:
        """Entropy summed over free action entries: ``(..., n_agents)`` (of the squashed
        Gaussian: the Gaussian's before the squashing, an upper bound)."""
        ent = (
            beta_entropy(*self._concentrations()) if self.kind == "beta" else self._base().entropy()
        )
        ent = jnp.broadcast_to(
            ent,
            jnp.broadcast_shapes(self.params.shape[:-1] + self.low.shape[-1:], self.low.shape),
        )
        return jnp.sum(jnp.where(self._free(), ent, 0.0), axis=-1)

    def mode(self) -> Array:
        """The deterministic action: the Beta's mean, the Gaussian's centre (clipped or
        squashed)."""
        if self.kind == "beta":
            alpha, beta = self._concentrations()
            return self.to_action(alpha / (alpha + beta))  # the mean: smooth and inside the box
        if self.kind == "tanh_gaussian":
            return self.to_action(self._mean_log_std()[0])
        return self.to_action(self.params)


START_MARGIN = 0.05  # a start's mean stays this share of the range inside the box


def starting_outputs(kind: str, share: Array, concentration: float) -> Array:
    """Network outputs ``(n_outputs(kind, act_dim),)`` whose distribution has the mean
    ``low + share * (high - low)`` (``share`` ``(act_dim,)`` in [0, 1], moved to within
    :data:`START_MARGIN` of the range's ends: the Beta's mean never reaches them).

    ``beta``: ``alpha + beta = concentration``, raised where a mean near an end needs it
    for both to stay above 1 (their floor, ``softplus + 1``); the Beta's standard deviation
    is ``sqrt(m (1 - m) / (concentration + 1))`` of the range. ``gaussian``: the centre
    (its spread is the separate ``log_std``)."""
    m = jnp.clip(share, START_MARGIN, 1.0 - START_MARGIN)
    if kind == "gaussian":
        return 2.0 * m - 1.0
    if kind != "beta":
        raise ValueError(f"no starting outputs for a {kind!r} distribution")
    total = jnp.maximum(concentration, 1.05 / jnp.minimum(m, 1.0 - m))
    return jnp.concatenate(
        [_inverse_softplus(m * total - 1.0), _inverse_softplus((1.0 - m) * total - 1.0)]
    )


def _inverse_softplus(y: Array) -> Array:
    return jnp.log(jnp.expm1(y))


def n_outputs(kind: str, act_dim: int) -> int:
    """Network outputs per agent for a distribution over ``act_dim`` entries."""
    return 2 * act_dim if kind in ("beta", "tanh_gaussian") else act_dim


def flat_draw(sampler, key, shape, dtype, **kwargs) -> Array:
    """``sampler(key, shape, dtype)`` drawn as one flat vector, then shaped: XLA on CPU
    vectorises along the last axis, and draws shaped ``(..., agents, 6)`` made the
    smartgrid rollout ~10 % slower."""
    return sampler(key, (math.prod(shape),), dtype, **kwargs).reshape(shape)


def sample_gamma(key, alpha: Array) -> Array:
    """Gamma(``alpha``, 1) samples by Marsaglia and Tsang's rejection method, every entry at
    once: each round redraws the entries not yet accepted (at most a few rounds, as each
    proposal is accepted with probability > 0.95). ``alpha < 1`` is boosted through
    Gamma(alpha + 1) * U^(1/alpha). Much faster on CPU than an element-wise sampler."""
    tiny = jnp.finfo(alpha.dtype).tiny
    boost = alpha < 1.0
    d = jnp.where(boost, alpha + 1.0, alpha) - 1.0 / 3.0
    c = 1.0 / jnp.sqrt(9.0 * d)

    def propose(carry):
        key, value, accepted = carry
        key, k_x, k_u = jax.random.split(key, 3)
        x = flat_draw(jax.random.normal, k_x, alpha.shape, alpha.dtype)
        u = flat_draw(jax.random.uniform, k_u, alpha.shape, alpha.dtype, minval=tiny)
        v = (1.0 + c * x) ** 3
        ok = (v > 0) & (jnp.log(u) < 0.5 * x**2 + d - d * v + d * jnp.log(jnp.maximum(v, 1e-30)))
        take = ok & ~accepted
        return key, jnp.where(take, d * v, value), accepted | ok

    key, k_boost = jax.random.split(key)
    start = (key, jnp.zeros_like(alpha), jnp.zeros(alpha.shape, bool))
    _, value, _ = jax.lax.while_loop(lambda c: ~jnp.all(c[2]), propose, start)
    u = flat_draw(jax.random.uniform, k_boost, alpha.shape, alpha.dtype, minval=tiny)
    return jnp.where(boost, value * u ** (1.0 / alpha), value)


def sample_beta(key, alpha: Array, beta: Array) -> Array:
    """Beta(``alpha``, ``beta``) samples as X / (X + Y), X ~ Gamma(alpha), Y ~ Gamma(beta),
    both drawn in one rejection loop (``alpha`` and ``beta`` of one shape)."""
    x, y = sample_gamma(key, jnp.stack([alpha, beta]))
    return x / (x + y)


def _log_beta_and_stack(alpha: Array, beta: Array) -> tuple[Array, Array]:
    """``(log B(alpha, beta), stack)``, ``stack = (alpha, beta, alpha + beta)`` on a new
    leading axis; ``lgamma`` applied once to the stack."""
    stack = jnp.stack([alpha, beta, alpha + beta])
    g = jax.lax.lgamma(stack)
    return g[0] + g[1] - g[2], stack


def beta_log_prob(x: Array, alpha: Array, beta: Array) -> Array:
    """Log-density of Beta(``alpha``, ``beta``) at ``x`` in (0, 1), elementwise."""
    log_b, _ = _log_beta_and_stack(alpha, beta)
    return (alpha - 1.0) * jnp.log(x) + (beta - 1.0) * jnp.log1p(-x) - log_b


def beta_entropy(alpha: Array, beta: Array) -> Array:
    """Entropy of Beta(``alpha``, ``beta``) in nats, elementwise."""
    log_b, stack = _log_beta_and_stack(alpha, beta)
    psi = jax.lax.digamma(stack)
    return log_b - (alpha - 1.0) * psi[0] - (beta - 1.0) * psi[1] + (alpha + beta - 2.0) * psi[2]
