"""evaluation: eval runs and one prediction row per question pass

Revision ID: 0003
Revises: 0002
"""

from alembic import op
import sqlalchemy as sa


revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('eval_runs',
    sa.Column('id', sa.String(length=64), nullable=False),
    sa.Column('model', sa.String(length=200), nullable=False),
    sa.Column('adapter', sa.String(length=32), nullable=False),
    sa.Column('source', sa.Text(), nullable=False),
    sa.Column('protocol', sa.String(length=32), nullable=False),
    sa.Column('config', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_table('eval_predictions',
    sa.Column('run_id', sa.String(length=64), nullable=False),
    sa.Column('subject', sa.String(length=200), nullable=False),
    sa.Column('question_id', sa.String(length=64), nullable=False),
    sa.Column('pass_key', sa.String(length=32), nullable=False),
    sa.Column('dimension', sa.String(length=64), nullable=False),
    sa.Column('option_order', sa.JSON(), nullable=False),
    sa.Column('template', sa.Integer(), nullable=False),
    sa.Column('answer', sa.Integer(), nullable=False),
    sa.Column('choice', sa.Integer(), nullable=True),
    sa.Column('correct', sa.Boolean(), nullable=True),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('matched_by', sa.String(length=16), server_default='', nullable=False),
    sa.Column('raw', sa.Text(), server_default='', nullable=False),
    sa.Column('scores', sa.JSON(), nullable=False),
    sa.Column('votes', sa.JSON(), nullable=False),
    sa.Column('reason', sa.Text(), server_default='', nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('run_id', 'subject')
    )
    op.create_index(op.f('ix_eval_predictions_question_id'), 'eval_predictions', ['question_id'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_eval_predictions_question_id'), table_name='eval_predictions')
    op.drop_table('eval_predictions')
    op.drop_table('eval_runs')
