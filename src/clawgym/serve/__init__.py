"""The embedded OpenAI-compatible model server: a batching engine over transformers, FastAPI in front, the local
models it loads (:mod:`clawgym.serve.models`) and the chat rendering that training and `summary --stats` share
(:mod:`clawgym.serve.chat_format`). Below llm: it imports nothing of it."""

from clawgym.serve.server import ServerError, ServerProcess, free_port, serve

__all__ = ["ServerError", "ServerProcess", "free_port", "serve"]
