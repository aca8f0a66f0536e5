"""work ledger: one row per stage, config key and subject that a stage has finished

Revision ID: 0002
Revises: 0001
"""

from alembic import op
import sqlalchemy as sa


revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('work_ledger',
    sa.Column('stage', sa.String(length=64), nullable=False),
    sa.Column('config_key', sa.String(length=64), nullable=False),
    sa.Column('subject', sa.String(length=200), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('reason', sa.Text(), server_default='', nullable=False),
    sa.Column('details', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('stage', 'config_key', 'subject')
    )


def downgrade() -> None:
    op.drop_table('work_ledger')
