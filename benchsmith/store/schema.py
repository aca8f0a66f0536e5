"""The store's tables, as SQLAlchemy Core metadata. Migrations in `migrations/versions` build exactly
this shape; `tests/benchsmith/test_store.py` fails if the two drift apart."""

from __future__ import annotations

import sqlalchemy as sa

metadata = sa.MetaData()

ID = sa.String(64)
When = sa.DateTime(timezone=True)

# Facts about the store itself, such as the random id it was created with.
store_info = sa.Table(
    "store_info", metadata,
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
)

items = sa.Table(
    "items", metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("path", sa.Text, nullable=False),
    sa.Column("width", sa.Integer, nullable=False),
    sa.Column("height", sa.Integer, nullable=False),
    sa.Column("status", sa.String(16), nullable=False, server_default="ok"),
    sa.Column("source", sa.Text, nullable=False, server_default=""),
    sa.Column("license", sa.Text, nullable=False, server_default=""),
    sa.Column("original_name", sa.Text, nullable=False, server_default=""),
    sa.Column("annotations", sa.JSON, nullable=False),
    sa.Column("meta", sa.JSON, nullable=False),
    sa.Column("created_at", When, nullable=False),
)

facts = sa.Table(
    "facts", metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("item_id", ID, nullable=False, index=True),
    sa.Column("extractor", sa.String(200), nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("box", sa.JSON),
    sa.Column("quad", sa.JSON),
    sa.Column("score", sa.Float),
    sa.Column("attributes", sa.JSON, nullable=False),
    sa.Column("provenance", sa.JSON, nullable=False),
    sa.Column("created_at", When, nullable=False),
)

questions = sa.Table(
    "questions", metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("item_id", ID, nullable=False, index=True),
    sa.Column("dimension_id", sa.Integer, nullable=False, index=True),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("options", sa.JSON, nullable=False),
    sa.Column("answer", sa.Integer, nullable=False),
    sa.Column("status", sa.String(16), nullable=False, index=True),
    sa.Column("generator", sa.String(64), nullable=False),
    sa.Column("model", sa.Text),
    sa.Column("prompt_version", sa.String(64)),
    sa.Column("provenance", sa.JSON, nullable=False),
    sa.Column("meta", sa.JSON, nullable=False),
    sa.Column("review_answer", sa.Integer),
    sa.Column("review_dimension_id", sa.Integer),
    sa.Column("created_at", When, nullable=False),
    sa.Column("updated_at", When, nullable=False),
)

# Every status change of every benchmark item (a question, a conversation), in order: the audit trail
# behind its current status. One lifecycle, so one history.
events = sa.Table(
    "events", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("subject_id", ID, nullable=False, index=True),
    sa.Column("from_status", sa.String(16)),
    sa.Column("to_status", sa.String(16), nullable=False),
    sa.Column("stage", sa.String(32), nullable=False),
    sa.Column("reason", sa.Text, nullable=False, server_default=""),
    sa.Column("created_at", When, nullable=False),
)

verdicts = sa.Table(
    "verdicts", metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("subject_id", sa.Text, nullable=False),
    sa.Column("subject_kind", sa.String(16), nullable=False),
    sa.Column("stage", sa.String(32), nullable=False),
    sa.Column("rule", sa.String(64), nullable=False),
    sa.Column("passed", sa.Boolean, nullable=False),
    sa.Column("reason", sa.Text, nullable=False, server_default=""),
    sa.Column("details", sa.JSON, nullable=False),
    sa.Column("created_at", When, nullable=False),
    sa.Index("ix_verdicts_subject_stage", "subject_id", "stage"),
    sa.Index("ix_verdicts_stage_passed", "stage", "passed"),
)

# The durable cache and ledger of paid LLM calls, keyed by a hash of model, messages and parameters.
llm_calls = sa.Table(
    "llm_calls", metadata,
    sa.Column("key", ID, primary_key=True),
    sa.Column("purpose", sa.String(32), nullable=False),
    sa.Column("model", sa.Text, nullable=False),
    sa.Column("request", sa.JSON, nullable=False),
    sa.Column("response", sa.JSON),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("error", sa.Text, nullable=False, server_default=""),
    sa.Column("tokens_in", sa.Integer, nullable=False, server_default="0"),
    sa.Column("tokens_out", sa.Integer, nullable=False, server_default="0"),
    sa.Column("cost_usd", sa.Float, nullable=False, server_default="0"),
    sa.Column("seconds", sa.Float, nullable=False, server_default="0"),
    sa.Column("created_at", When, nullable=False),
)

# One row per benchmark item and review round: its first review (round "") and each second look after
# it was published (round: the release version that was in doubt). Written before the push (task_id
# empty) and completed after, so a push that died in between asks the server first.
review_tasks = sa.Table(
    "review_tasks", metadata,
    sa.Column("subject_id", ID, primary_key=True),
    sa.Column("round", sa.String(64), primary_key=True, server_default=""),
    sa.Column("kind", sa.String(16), nullable=False, server_default="question"),
    sa.Column("project_id", sa.Integer, nullable=False),
    sa.Column("task_id", sa.Integer),
    sa.Column("pushed_at", When, nullable=False),
)

# Every version of every annotator's review of a benchmark item of any kind, as pulled from Label Studio: a new
# row per distinct version (the id hashes it), so no edit is lost. Beyond keep or discard, a question's review
# holds an answer and a dimension, a conversation's the turns as the annotator left them.
reviews = sa.Table(
    "reviews", metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("kind", sa.String(16), nullable=False, server_default="question"),
    sa.Column("subject_id", ID, nullable=False, index=True),
    sa.Column("task_id", sa.Integer, nullable=False),
    sa.Column("annotation_id", sa.Integer, nullable=False),
    sa.Column("annotator", sa.Text, nullable=False),
    sa.Column("answer", sa.Integer),
    sa.Column("dimension_id", sa.Integer),
    sa.Column("turns", sa.JSON),
    sa.Column("keep", sa.Boolean, nullable=False),
    sa.Column("reasons", sa.JSON, nullable=False),
    sa.Column("comment", sa.Text, nullable=False, server_default=""),
    sa.Column("submitted_at", When, nullable=False),
    sa.Column("created_at", When, nullable=False),
)

releases = sa.Table(
    "releases", metadata,
    sa.Column("version", sa.String(64), primary_key=True),
    sa.Column("path", sa.Text, nullable=False, server_default=""),
    sa.Column("n_questions", sa.Integer, nullable=False),
    sa.Column("changelog", sa.JSON, nullable=False),
    sa.Column("meta", sa.JSON, nullable=False),
    sa.Column("created_at", When, nullable=False),
)

# Which items a release holds, of every kind, with a hash of their published content so no change is silent.
release_entries = sa.Table(
    "release_entries", metadata,
    sa.Column("version", sa.String(64), primary_key=True),
    sa.Column("subject_id", ID, primary_key=True),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("content_hash", ID, nullable=False),
)

# One row per stage per command run: timings and counters for the run report.
stage_runs = sa.Table(
    "stage_runs", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("run_id", sa.String(64), nullable=False, index=True),
    sa.Column("stage", sa.String(32), nullable=False),
    sa.Column("started_at", When, nullable=False),
    sa.Column("finished_at", When),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("stats", sa.JSON, nullable=False),
)

# What each stage has finished, per subject, under the configuration that produced it. A row means
# "done (or failed for good) under this config key": a rerun under the same key skips the subject, and a
# changed key (another model, prompt or rule) makes it pending again. Work that should be tried again
# (an HTTP failure) gets no row.
work_ledger = sa.Table(
    "work_ledger", metadata,
    sa.Column("stage", sa.String(64), primary_key=True),
    sa.Column("config_key", sa.String(200), primary_key=True),
    sa.Column("subject", sa.String(200), primary_key=True),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("reason", sa.Text, nullable=False, server_default=""),
    sa.Column("details", sa.JSON, nullable=False),
    sa.Column("created_at", When, nullable=False),
)

# One evaluation of one model on one set of questions under one protocol and configuration.
eval_runs = sa.Table(
    "eval_runs", metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("model", sa.String(200), nullable=False),
    sa.Column("adapter", sa.String(32), nullable=False),
    sa.Column("source", sa.Text, nullable=False),
    sa.Column("protocol", sa.String(32), nullable=False),
    sa.Column("config", sa.JSON, nullable=False),
    sa.Column("created_at", When, nullable=False),
)

# What a model answered on one pass of one question (a rotation, a prompt template), with its raw output.
eval_predictions = sa.Table(
    "eval_predictions", metadata,
    sa.Column("run_id", sa.String(64), primary_key=True),
    sa.Column("subject", sa.String(200), primary_key=True),
    sa.Column("question_id", ID, nullable=False, index=True),
    sa.Column("pass_key", sa.String(32), nullable=False),
    sa.Column("dimension", sa.String(64), nullable=False),
    sa.Column("option_order", sa.JSON, nullable=False),
    sa.Column("template", sa.Integer, nullable=False),
    sa.Column("answer", sa.Integer, nullable=False),
    sa.Column("choice", sa.Integer),
    sa.Column("correct", sa.Boolean),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("matched_by", sa.String(16), nullable=False, server_default=""),
    sa.Column("raw", sa.Text, nullable=False, server_default=""),
    sa.Column("scores", sa.JSON, nullable=False),
    sa.Column("votes", sa.JSON, nullable=False),     # the judge ensemble's votes (1, 0, null: unparseable)
    sa.Column("reason", sa.Text, nullable=False, server_default=""),
    sa.Column("created_at", When, nullable=False),
)

# Multi-turn conversations about one image (ConvBench): three turns, each an instruction, a reference
# answer and focus points. `turns` is as generated (it makes the id); `review_turns` the accepted edit.
conversations = sa.Table(
    "conversations", metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("item_id", ID, nullable=False, index=True),
    sa.Column("turns", sa.JSON, nullable=False),
    sa.Column("status", sa.String(16), nullable=False, index=True),
    sa.Column("generator", sa.String(64), nullable=False),
    sa.Column("model", sa.Text),
    sa.Column("prompt_version", sa.String(200)),
    sa.Column("provenance", sa.JSON, nullable=False),
    sa.Column("meta", sa.JSON, nullable=False),
    sa.Column("review_turns", sa.JSON),
    sa.Column("created_at", When, nullable=False),
    sa.Column("updated_at", When, nullable=False),
)

# ConvEval: one row per conversation and setting of an eval run: the answers, the opponent's, and the
# judges' votes and pooled results per target (turns 1-3, 0 for the whole conversation).
conversation_evals = sa.Table(
    "conversation_evals", metadata,
    sa.Column("run_id", sa.String(64), primary_key=True),
    sa.Column("subject", sa.String(200), primary_key=True),
    sa.Column("conversation_id", ID, nullable=False, index=True),
    sa.Column("setting", sa.String(32), nullable=False),
    sa.Column("answers", sa.JSON, nullable=False),
    sa.Column("opponent", sa.JSON, nullable=False),
    sa.Column("direct", sa.JSON, nullable=False),
    sa.Column("pairwise", sa.JSON, nullable=False),
    sa.Column("created_at", When, nullable=False),
)

# LLM rate limits shared by every process on the store: one token bucket per endpoint and model, its
# levels as of `stamp` (seconds since the epoch on the database's clock, so workers' clocks never matter).
# No created_at: a bucket draining is not new work for a stage's state token.
rate_buckets = sa.Table(
    "rate_buckets", metadata,
    sa.Column("name", sa.Text, primary_key=True),
    sa.Column("requests", sa.Float, nullable=False),
    sa.Column("tokens", sa.Float, nullable=False),
    sa.Column("stamp", sa.Float, nullable=False),
)

# One row per batch job of LLM calls (benchsmith.llm_batch). Its requests are the `llm_calls` rows with
# status 'in_batch' and `error` naming the batch; prices are fixed at submission, so collecting needs no
# settings. `status` is 'uploading' until the provider has the job, then the provider's word, then
# 'collected' (answers stored) or 'abandoned' (never reached the provider; its requests were released).
llm_batches = sa.Table(
    "llm_batches", metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("endpoint", sa.Text, nullable=False),
    sa.Column("model", sa.Text, nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("owner", sa.Text, nullable=False, server_default=""),
    sa.Column("input_file_id", sa.Text, nullable=False, server_default=""),
    sa.Column("job_id", sa.Text, nullable=False, server_default=""),
    sa.Column("requests", sa.Integer, nullable=False),
    sa.Column("answered", sa.Integer, nullable=False, server_default="0"),
    sa.Column("failed", sa.Integer, nullable=False, server_default="0"),
    sa.Column("malformed", sa.Integer, nullable=False, server_default="0"),
    sa.Column("estimated_tokens", sa.Integer, nullable=False, server_default="0"),
    sa.Column("prices", sa.JSON, nullable=False),   # {"batch": [in, out], "live": [in, out]} USD per M tokens
    sa.Column("cost_usd", sa.Float, nullable=False, server_default="0"),
    sa.Column("live_cost_usd", sa.Float, nullable=False, server_default="0"),
    sa.Column("created_at", When, nullable=False),
    sa.Column("finished_at", When),
)
