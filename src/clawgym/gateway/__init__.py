"""The gateway: an OpenAI-compatible proxy that records every model call, token-exact, in a data pool."""

from clawgym.gateway.app import Gateway
from clawgym.gateway.budget import Budget, BudgetBook
from clawgym.gateway.sampling import SamplingOverride
from clawgym.gateway.server import GatewayError, GatewayThread, load_tokenizer, run_gateway

__all__ = ["Budget", "BudgetBook", "Gateway", "GatewayError", "GatewayThread", "SamplingOverride", "load_tokenizer",
           "run_gateway"]
