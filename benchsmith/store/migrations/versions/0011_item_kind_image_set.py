"""items.kind: room for `image_set` (an ordered set of stored images)

Revision ID: 0011
Revises: 0010
"""

from alembic import op
import sqlalchemy as sa


revision = '0011'
down_revision = '0010'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('items', schema=None) as batch_op:
        batch_op.alter_column('kind', existing_type=sa.String(length=8), type_=sa.String(length=16),
                              existing_nullable=False)


def downgrade() -> None:
    with op.batch_alter_table('items', schema=None) as batch_op:
        batch_op.alter_column('kind', existing_type=sa.String(length=16), type_=sa.String(length=8),
                              existing_nullable=False)
