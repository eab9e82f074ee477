"""Settings for the OpenAI-compatible chat endpoint used by the LLM path.

``LLMConfig.from_env(**overrides)`` reads ``OPENAI_BASE_URL``, ``OPENAI_API_KEY`` and
``TRITONDX_LLM_MODEL`` (default ``gpt-4o-mini``), plus the optional ``TRITONDX_LLM_TEMPERATURE``,
``TRITONDX_LLM_TIMEOUT_S``, ``TRITONDX_LLM_MAX_RETRIES`` and ``TRITONDX_LLM_MAX_TOKENS``; explicit
keyword arguments win over the environment. The API key is a ``SecretStr``: the config's ``repr``,
``str`` and JSON dump show ``**********``, and the key is registered with the log redactor.
"""

from __future__ import annotations

import os
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from tritondx.tools.llm.redact import register_secret

DEFAULT_MODEL = "gpt-4o-mini"

# field name -> environment variable
ENV_VARS: dict[str, str] = {
    "base_url": "OPENAI_BASE_URL",
    "api_key": "OPENAI_API_KEY",
    "model": "TRITONDX_LLM_MODEL",
    "temperature": "TRITONDX_LLM_TEMPERATURE",
    "timeout_s": "TRITONDX_LLM_TIMEOUT_S",
    "max_retries": "TRITONDX_LLM_MAX_RETRIES",
    "max_tokens": "TRITONDX_LLM_MAX_TOKENS",
}


class LLMConfig(BaseModel):
    """Where and how to call the chat model. Retries are done by ``LLMClient`` (tenacity)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    base_url: str | None = Field(default=None, description="OpenAI-compatible base URL, e.g. http://host:8000/v1; "
                                                           "None: api.openai.com")
    model: str = DEFAULT_MODEL
    api_key: SecretStr | None = None
    temperature: float | None = Field(default=0.2, ge=0.0, le=2.0,
                                      description="None: not sent (for models that only accept the default)")
    timeout_s: float = Field(default=120.0, gt=0)
    max_retries: int = Field(default=3, ge=0, description="retries after the first attempt (timeouts, 429, 5xx, "
                                                          "connection errors)")
    max_tokens: int | None = Field(default=None, gt=0, description="completion token cap; None: server default")
    retry_wait_s: float = Field(default=1.0, ge=0, description="first backoff wait; doubles each retry")
    retry_wait_max_s: float = Field(default=30.0, ge=0, description="cap on one backoff wait (also on Retry-After)")

    @field_validator("api_key")
    @classmethod
    def _register(cls, v: SecretStr | None) -> SecretStr | None:
        if v is not None:
            register_secret(v.get_secret_value())
        return v

    @field_validator("base_url")
    @classmethod
    def _strip_slash(cls, v: str | None) -> str | None:
        v = (v or "").strip().rstrip("/")
        return v or None

    @property
    def configured(self) -> bool:
        """True when there is something to call: a key (OpenAI) or an explicit base URL (local server)."""
        return self.api_key is not None or self.base_url is not None

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None, **overrides: Any) -> "LLMConfig":
        """Build from the environment (or ``env``); keyword arguments that are not None take precedence."""
        source = os.environ if env is None else env
        values: dict[str, Any] = {}
        for field, var in ENV_VARS.items():
            raw = source.get(var)
            if raw is not None and raw.strip() != "":
                values[field] = raw.strip()
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)
