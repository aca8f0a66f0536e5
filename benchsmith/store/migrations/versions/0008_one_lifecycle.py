"""one lifecycle: questions and conversations share one event history, one review-task table and one
release membership table, each row naming its kind; withdrawn items get a status of their own

Revision ID: 0008
Revises: 0007
"""

import json
from datetime import datetime, timezone

from alembic import op
import sqlalchemy as sa


revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None

When = sa.DateTime(timezone=True)


def upgrade() -> None:
    conn = op.get_bind()
    events = op.create_table('events',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('subject_id', sa.String(length=64), nullable=False),
    sa.Column('from_status', sa.String(length=16), nullable=True),
    sa.Column('to_status', sa.String(length=16), nullable=False),
    sa.Column('stage', sa.String(length=32), nullable=False),
    sa.Column('reason', sa.Text(), server_default='', nullable=False),
    sa.Column('created_at', When, nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index(op.f('ix_events_subject_id'), 'events', ['subject_id'], unique=False)
    # the old histories in the order they happened, questions before conversations on a tie
    for kind, table, key in (('question', 'question_events', 'question_id'),
                             ('conversation', 'conversation_events', 'conversation_id')):
        conn.execute(sa.text(f"INSERT INTO events (kind, subject_id, from_status, to_status, stage, reason, created_at) "
                             f"SELECT '{kind}', {key}, from_status, to_status, stage, reason, created_at FROM {table} "
                             "ORDER BY id"))
    op.drop_table('question_events')
    op.drop_table('conversation_events')

    with op.batch_alter_table('review_tasks') as batch:
        batch.alter_column('question_id', new_column_name='subject_id', existing_type=sa.String(length=64),
                           existing_nullable=False)
        batch.add_column(sa.Column('kind', sa.String(length=16), server_default='question', nullable=False))
    conn.execute(sa.text("INSERT INTO review_tasks (subject_id, round, kind, project_id, task_id, pushed_at) "
                         "SELECT conversation_id, '', 'conversation', project_id, task_id, pushed_at "
                         "FROM conversation_review_tasks"))
    op.drop_table('conversation_review_tasks')

    op.create_table('release_entries',
    sa.Column('version', sa.String(length=64), nullable=False),
    sa.Column('subject_id', sa.String(length=64), nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('content_hash', sa.String(length=64), nullable=False),
    sa.PrimaryKeyConstraint('version', 'subject_id')
    )
    for kind, table, key in (('question', 'release_questions', 'question_id'),
                             ('conversation', 'release_conversations', 'conversation_id')):
        conn.execute(sa.text(f"INSERT INTO release_entries (version, subject_id, kind, content_hash) "
                             f"SELECT version, {key}, '{kind}', content_hash FROM {table}"))
        op.drop_table(table)

    # Withdrawals lived in each release's meta while the items stayed `published`: give them their status.
    now = datetime.now(timezone.utc)
    withdrawn: dict[str, str] = {}
    for version, meta in conn.execute(sa.text('SELECT version, meta FROM releases ORDER BY created_at')):
        meta = json.loads(meta) if isinstance(meta, str) else meta
        withdrawn |= {subject: version for subject in meta.get('withdrawn', [])}
    for kind, table in (('question', 'questions'), ('conversation', 'conversations')):
        for subject, status in conn.execute(sa.text(f'SELECT id, status FROM {table}')):
            if subject in withdrawn and status in ('accepted', 'published'):
                conn.execute(sa.text(f"UPDATE {table} SET status = 'withdrawn' WHERE id = :id"), {'id': subject})
                conn.execute(sa.insert(events), [{
                    'kind': kind, 'subject_id': subject, 'from_status': status, 'to_status': 'withdrawn',
                    'stage': 'publish', 'reason': f'withdrawn in {withdrawn[subject]} (carried over by migration 0008)',
                    'created_at': now}])


def downgrade() -> None:
    conn = op.get_bind()
    for table in ('questions', 'conversations'):
        conn.execute(sa.text(f"UPDATE {table} SET status = 'published' WHERE status = 'withdrawn'"))
    for table, key in (('release_questions', 'question_id'), ('release_conversations', 'conversation_id')):
        op.create_table(table,
        sa.Column('version', sa.String(length=64), nullable=False),
        sa.Column(key, sa.String(length=64), nullable=False),
        sa.Column('content_hash', sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint('version', key)
        )
        kind = 'question' if table == 'release_questions' else 'conversation'
        conn.execute(sa.text(f'INSERT INTO {table} (version, {key}, content_hash) SELECT version, subject_id, '
                             f"content_hash FROM release_entries WHERE kind = '{kind}'"))
    op.drop_table('release_entries')
    op.create_table('conversation_review_tasks',
    sa.Column('conversation_id', sa.String(length=64), nullable=False),
    sa.Column('project_id', sa.Integer(), nullable=False),
    sa.Column('task_id', sa.Integer(), nullable=True),
    sa.Column('pushed_at', When, nullable=False),
    sa.PrimaryKeyConstraint('conversation_id')
    )
    conn.execute(sa.text("INSERT INTO conversation_review_tasks SELECT subject_id, project_id, task_id, pushed_at "
                         "FROM review_tasks WHERE kind = 'conversation'"))
    conn.execute(sa.text("DELETE FROM review_tasks WHERE kind = 'conversation'"))
    with op.batch_alter_table('review_tasks') as batch:
        batch.drop_column('kind')
        batch.alter_column('subject_id', new_column_name='question_id', existing_type=sa.String(length=64),
                           existing_nullable=False)
    for table, key in (('question_events', 'question_id'), ('conversation_events', 'conversation_id')):
        op.create_table(table,
        sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
        sa.Column(key, sa.String(length=64), nullable=False),
        sa.Column('from_status', sa.String(length=16), nullable=True),
        sa.Column('to_status', sa.String(length=16), nullable=False),
        sa.Column('stage', sa.String(length=32), nullable=False),
        sa.Column('reason', sa.Text(), server_default='', nullable=False),
        sa.Column('created_at', When, nullable=False),
        sa.PrimaryKeyConstraint('id')
        )
        op.create_index(op.f(f'ix_{table}_{key}'), table, [key], unique=False)
        kind = 'question' if table == 'question_events' else 'conversation'
        conn.execute(sa.text(f'INSERT INTO {table} ({key}, from_status, to_status, stage, reason, created_at) '
                             f"SELECT subject_id, from_status, to_status, stage, reason, created_at FROM events "
                             f"WHERE kind = '{kind}' ORDER BY id"))
    op.drop_table('events')
