"""The LLM path: an OpenAI-compatible chat client, prompts, and the LLM rewriter.

Import from the submodules (kept lazy: langchain is only loaded when used):

- ``tritondx.tools.llm.config``: ``LLMConfig`` (``LLMConfig.from_env(**overrides)``)
- ``tritondx.tools.llm.client``: ``LLMClient``, ``LLMUsage``, ``ChatReply``, ``LLMError`` and subclasses
- ``tritondx.tools.llm.rewriter``: ``LLMRewriter``, ``RewriteProposal``
- ``tritondx.tools.llm.prompts``: ``load_prompt``, ``render_prompt``
- ``tritondx.tools.llm.redact``: ``register_secret``, ``redact_secrets`` (structlog), ``RedactingFilter``
- ``tritondx.tools.llm.bridge``: ``llm_propose``, the rewriter's seam (a candidate, checked statically)
"""
