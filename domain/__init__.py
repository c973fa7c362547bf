"""The domain: what specs, agent configs, trials, rewards and the vocabulary are; pure Python, imports nothing of ours.

Everything else (models, the domain writes, queries, the web, the worker) may
import it; it imports nothing from flask, db, models, queries, blueprints or
worker, so the rules below have exactly one home.
"""
