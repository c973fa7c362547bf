"""AgentForge test suite."""
