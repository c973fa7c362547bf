"""Every write, shared by the web, the CLI, the importers and the worker: accounts, invitations, tokens, the catalog,
runs and trials, the worker's claims and presence, the demo data. Each takes a `Session` and the caller commits; the
reads are in queries/.
"""
