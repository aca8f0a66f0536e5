"""conversations: multi-turn conversation items, their status history, reviews, releases and ConvEval results

Revision ID: 0006
Revises: 0005
"""

from alembic import op
import sqlalchemy as sa


revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('conversations',
    sa.Column('id', sa.String(length=64), nullable=False),
    sa.Column('item_id', sa.String(length=64), nullable=False),
    sa.Column('turns', sa.JSON(), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('generator', sa.String(length=64), nullable=False),
    sa.Column('model', sa.Text(), nullable=True),
    sa.Column('prompt_version', sa.String(length=200), nullable=True),
    sa.Column('provenance', sa.JSON(), nullable=False),
    sa.Column('meta', sa.JSON(), nullable=False),
    sa.Column('review_turns', sa.JSON(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index(op.f('ix_conversations_item_id'), 'conversations', ['item_id'], unique=False)
    op.create_index(op.f('ix_conversations_status'), 'conversations', ['status'], unique=False)
    op.create_table('conversation_events',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('conversation_id', sa.String(length=64), nullable=False),
    sa.Column('from_status', sa.String(length=16), nullable=True),
    sa.Column('to_status', sa.String(length=16), nullable=False),
    sa.Column('stage', sa.String(length=32), nullable=False),
    sa.Column('reason', sa.Text(), server_default='', nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index(op.f('ix_conversation_events_conversation_id'), 'conversation_events', ['conversation_id'],
                    unique=False)
    op.create_table('conversation_review_tasks',
    sa.Column('conversation_id', sa.String(length=64), nullable=False),
    sa.Column('project_id', sa.Integer(), nullable=False),
    sa.Column('task_id', sa.Integer(), nullable=True),
    sa.Column('pushed_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('conversation_id')
    )
    op.create_table('conversation_reviews',
    sa.Column('id', sa.String(length=64), nullable=False),
    sa.Column('conversation_id', sa.String(length=64), nullable=False),
    sa.Column('task_id', sa.Integer(), nullable=False),
    sa.Column('annotation_id', sa.Integer(), nullable=False),
    sa.Column('annotator', sa.Text(), nullable=False),
    sa.Column('keep', sa.Boolean(), nullable=False),
    sa.Column('reasons', sa.JSON(), nullable=False),
    sa.Column('comment', sa.Text(), server_default='', nullable=False),
    sa.Column('turns', sa.JSON(), nullable=False),
    sa.Column('submitted_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index(op.f('ix_conversation_reviews_conversation_id'), 'conversation_reviews', ['conversation_id'],
                    unique=False)
    op.create_table('release_conversations',
    sa.Column('version', sa.String(length=64), nullable=False),
    sa.Column('conversation_id', sa.String(length=64), nullable=False),
    sa.Column('content_hash', sa.String(length=64), nullable=False),
    sa.PrimaryKeyConstraint('version', 'conversation_id')
    )
    op.create_table('conversation_evals',
    sa.Column('run_id', sa.String(length=64), nullable=False),
    sa.Column('subject', sa.String(length=200), nullable=False),
    sa.Column('conversation_id', sa.String(length=64), nullable=False),
    sa.Column('setting', sa.String(length=32), nullable=False),
    sa.Column('answers', sa.JSON(), nullable=False),
    sa.Column('opponent', sa.JSON(), nullable=False),
    sa.Column('direct', sa.JSON(), nullable=False),
    sa.Column('pairwise', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('run_id', 'subject')
    )
    op.create_index(op.f('ix_conversation_evals_conversation_id'), 'conversation_evals', ['conversation_id'],
                    unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_conversation_evals_conversation_id'), table_name='conversation_evals')
    op.drop_table('conversation_evals')
    op.drop_table('release_conversations')
    op.drop_index(op.f('ix_conversation_reviews_conversation_id'), table_name='conversation_reviews')
    op.drop_table('conversation_reviews')
    op.drop_table('conversation_review_tasks')
    op.drop_index(op.f('ix_conversation_events_conversation_id'), table_name='conversation_events')
    op.drop_table('conversation_events')
    op.drop_index(op.f('ix_conversations_status'), table_name='conversations')
    op.drop_index(op.f('ix_conversations_item_id'), table_name='conversations')
    op.drop_table('conversations')
