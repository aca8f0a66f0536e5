"""llm_batches: batch jobs of LLM calls (OpenAI Batch API format), with their costs at batch prices

Revision ID: 0010
Revises: 0009
"""

from alembic import op
import sqlalchemy as sa


revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('llm_batches',
    sa.Column('id', sa.String(length=64), nullable=False),
    sa.Column('endpoint', sa.Text(), nullable=False),
    sa.Column('model', sa.Text(), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('owner', sa.Text(), server_default='', nullable=False),
    sa.Column('input_file_id', sa.Text(), server_default='', nullable=False),
    sa.Column('job_id', sa.Text(), server_default='', nullable=False),
    sa.Column('requests', sa.Integer(), nullable=False),
    sa.Column('answered', sa.Integer(), server_default='0', nullable=False),
    sa.Column('failed', sa.Integer(), server_default='0', nullable=False),
    sa.Column('malformed', sa.Integer(), server_default='0', nullable=False),
    sa.Column('estimated_tokens', sa.Integer(), server_default='0', nullable=False),
    sa.Column('prices', sa.JSON(), nullable=False),
    sa.Column('cost_usd', sa.Float(), server_default='0', nullable=False),
    sa.Column('live_cost_usd', sa.Float(), server_default='0', nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.PrimaryKeyConstraint('id')
    )


def downgrade() -> None:
    op.drop_table('llm_batches')
