"""Wrapper base: an environment that delegates to another one."""

from __future__ import annotations

from jaxgrid.env import Environment
from jaxgrid.rollout import is_controller


class Wrapper(Environment):
    """Delegates everything to ``env``; subclasses override what they change."""

    def __init__(self, env: Environment):
        self.env = env

    def __getattr__(self, name):
        return getattr(self.env, name)

    @property
    def agents(self):
        return self.env.agents

    @property
    def agent_types(self):
        return self.env.agent_types

    @property
    def objective_names(self):
        return self.env.objective_names

    @property
    def cost_names(self):
        return self.env.cost_names

    @property
    def horizon(self):
        return self.env.horizon

    @property
    def abort_names(self):
        return self.env.abort_names

    @property
    def action_names(self):
        return self.env.action_names

    def policy_metrics(self, policy, params, key, episodes):
        return self.env.policy_metrics(policy, params, key, episodes)

    @property
    def solver_rtol(self):
        return self.env.solver_rtol

    def observation_names(self, params):
        return self.env.observation_names(params)

    @property
    def name(self) -> str:
        return self.env.name

    def default_params(self):
        return self.env.default_params()

    def observation_space(self, params):
        return self.env.observation_space(params)

    def action_space(self, params):
        return self.env.action_space(params)

    def scalarisation(self, params):
        return self.env.scalarisation(params)

    def with_scalarisation(self, params, scalarisation):
        return self.env.with_scalarisation(params, scalarisation)

    def baselines(self, params):
        """The wrapped environment's baselines, less its controllers (which plan on its
        own state and reward, not the wrapper's)."""
        return {n: p for n, p in self.env.baselines(params).items() if not is_controller(p)}

    def abort_values(self, state, params):
        return self.env.abort_values(state, params)

    def reset_env(self, key, params):
        return self.env.reset_env(key, params)

    def observe(self, state, params):
        return self.env.observe(state, params)

    def transition(self, key, state, action, params):
        return self.env.transition(key, state, action, params)

    def world_state(self, state, params):
        return self.env.world_state(state, params)
