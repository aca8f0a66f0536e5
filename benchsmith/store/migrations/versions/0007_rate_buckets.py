"""rate_buckets: LLM rate limits shared through the store, one token bucket per endpoint and model

Revision ID: 0007
Revises: 0006
"""

from alembic import op
import sqlalchemy as sa


revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('rate_buckets',
    sa.Column('name', sa.Text(), nullable=False),
    sa.Column('requests', sa.Float(), nullable=False),
    sa.Column('tokens', sa.Float(), nullable=False),
    sa.Column('stamp', sa.Float(), nullable=False),
    sa.PrimaryKeyConstraint('name')
    )


def downgrade() -> None:
    op.drop_table('rate_buckets')
