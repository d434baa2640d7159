"""The gateway: an OpenAI-compatible proxy that records every model call, token-exact, in a data pool."""

from clawgym.gateway.app import Gateway
from clawgym.gateway.budget import Budget, BudgetBook
from clawgym.gateway.connections import ConnectionLimits
from clawgym.gateway.routes import route_key, trajectory_key
from clawgym.gateway.sampling import SamplingOverride
from clawgym.gateway.server import GatewayError, GatewayThread, load_tokenizer, run_gateway

__all__ = ["Budget", "BudgetBook", "ConnectionLimits", "Gateway", "GatewayError", "GatewayThread",
           "SamplingOverride", "load_tokenizer", "route_key", "run_gateway", "trajectory_key"]
