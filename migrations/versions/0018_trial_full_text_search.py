"""Full-text search over trials: a tsvector of each trial's task, log and steps, kept by the statement that records it.

`trial_step_text(step)` is the searchable text of one stored step (its tool
when the command does not already start with it, the command with its JSON
arguments, the observation, the agent's message and reasoning); it is also what
search snippets and the trial page highlight, so both read the same text.
`trial_search_vector(task, log, steps)` is the 'simple' configuration's
tsvector of the task, the log and every step's text (the first
SEARCH_TEXT_CHARS characters, so no trial can exceed tsvector's 1 MB limit).
'simple' lowercases words and keeps every one of them: identifiers (SKU-7062
is `sku`, `-7062`), tool names and paths are never stemmed or dropped as stop
words, and a phrase matches the words as written.

writes.runs.RECORD_TRIAL writes evaluation_trials.search_vector in the same
statement that inserts the trial; the GIN index is maintained in that
transaction. Existing trials are filled one organization at a time (the tables
are FORCE'd under RLS even for the owner).

Revision ID: 0018
Revises: 0017
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import TSVECTOR

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

SEARCH_TEXT_CHARS = 200_000

STEP_TEXT = """
    CREATE FUNCTION trial_step_text(step jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
        SELECT concat_ws(E'\\n',
            CASE WHEN starts_with(coalesce(step ->> 'command', ''), step ->> 'tool') THEN NULL ELSE step ->> 'tool' END,
            nullif(step ->> 'command', ''),
            nullif(step ->> 'observation', ''),
            CASE jsonb_typeof(step -> 'message')
                WHEN 'string' THEN step ->> 'message'
                WHEN 'array' THEN (SELECT string_agg(part ->> 'text', E'\\n')
                                   FROM jsonb_array_elements(step -> 'message') AS part)
            END,
            step ->> 'reasoning')
    $$
"""

SEARCH_VECTOR = f"""
    CREATE FUNCTION trial_search_vector(task text, log text, steps jsonb) RETURNS tsvector
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
        SELECT to_tsvector('simple', left(concat_ws(E'\\n', task, log,
            (SELECT string_agg(trial_step_text(s.step), E'\\n' ORDER BY s.n)
             FROM jsonb_array_elements(CASE WHEN jsonb_typeof(steps) = 'array' THEN steps END)
                  WITH ORDINALITY AS s(step, n))), {SEARCH_TEXT_CHARS}))
    $$
"""

BACKFILL = """
    UPDATE evaluation_trials SET search_vector = trial_search_vector(task, log_excerpt, steps)
    WHERE search_vector IS NULL
"""


def upgrade() -> None:
    """Add the functions, evaluation_trials.search_vector (filled per organization) and its GIN index."""
    op.execute(STEP_TEXT)
    op.execute(SEARCH_VECTOR)
    op.add_column("evaluation_trials", sa.Column("search_vector", TSVECTOR(), nullable=True))
    # Lexeme statistics deep enough that a rare word or identifier (SKU-7062: not among the default 1,000 most
    # common lexemes) is estimated rare: the planner then reads the GIN index rather than walking trials newest
    # first hoping to meet 50 matches soon (seconds at 1M trials when it is wrong).
    op.execute("ALTER TABLE evaluation_trials ALTER COLUMN search_vector SET STATISTICS 1000")
    connection = op.get_bind()
    for (org_id,) in connection.execute(sa.text("SELECT id FROM organizations ORDER BY id")).all():
        connection.execute(sa.text("SELECT set_config('app.current_org', :org, true)"), {"org": str(org_id)})
        connection.execute(sa.text(BACKFILL))
    connection.execute(sa.text("SELECT set_config('app.current_org', '', true)"))
    op.create_index(
        "ix_evaluation_trials_search_vector", "evaluation_trials", ["search_vector"], postgresql_using="gin"
    )


def downgrade() -> None:
    """Drop the index, the column and the functions."""
    op.drop_index("ix_evaluation_trials_search_vector", table_name="evaluation_trials")
    op.drop_column("evaluation_trials", "search_vector")
    op.execute("DROP FUNCTION trial_search_vector(text, text, jsonb)")
    op.execute("DROP FUNCTION trial_step_text(jsonb)")
