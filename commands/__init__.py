"""The domain's writes that the web, the CLI and the worker share: accounts, invitations, tokens, the catalog, runs."""
