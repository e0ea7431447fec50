"""Language-model backends: any LangChain chat model, an OpenAI-compatible endpoint, or the
embedded offline default."""

from dynakrag.llm.client import LLMClient, Usage
from dynakrag.llm.factory import chat_model_from_config, describe_backend

__all__ = ["LLMClient", "Usage", "chat_model_from_config", "describe_backend"]
