"""The openai-chat agent: a model behind any OpenAI-compatible chat-completions server, run in the trial's sandbox.

The worker never calls the tenant's `baseUrl` itself (it holds the database's credentials; a URL chosen by a tenant
must not be fetched from its process): it starts the built-in program `openai_program.py` in the trial's
sandbox, with the config's `env` (the API key among it) and network on, and talks to it over the command-agent
protocol like any command agent.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from domain import agents as configs
from worker.agents.command import CommandAgent
from worker.agents.registry import agent_of
from worker.masking import Masker
from worker.sandbox import TrialSandbox

PROGRAM = Path(__file__).with_name("openai_program.py")
SETTINGS = ("baseUrl", "model", "apiKeyEnv", "temperature", "maxTokens", "tokenBudget", "systemPrompt", "extraBody")


class OpenAIChatAgent(CommandAgent):
    """Runs the built-in chat-completions program for an openai-chat config (network on, the config's env)."""

    def __init__(self, config: configs.OpenAIChatAgent, sandbox: TrialSandbox, masker: Masker | None = None) -> None:
        settings = config.model_dump(mode="json", exclude_none=True, include=set(SETTINGS))  # what the program reads
        # -I: the program sees neither PYTHON* variables of the config's env nor the directory it lives in.
        argv = [sys.executable, "-I", str(PROGRAM), json.dumps(settings)]
        program = configs.CommandAgent.model_construct(
            kind="command", argv=argv, env=config.env, vars=config.vars, network=True, limits=config.limits
        )
        super().__init__(program, sandbox, masker)
        self.system_prompt = config.systemPrompt


@agent_of(configs.OpenAIChatAgent)
def start(config: configs.OpenAIChatAgent, seed: int, sandbox: TrialSandbox, masker: Masker | None) -> OpenAIChatAgent:
    """The model's agent of one trial: the built-in chat-completions program in the trial's sandbox."""
    return OpenAIChatAgent(config, sandbox, masker)
