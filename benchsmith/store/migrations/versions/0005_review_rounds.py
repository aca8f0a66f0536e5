"""review rounds: a question can be sent to Label Studio again for a second look after it is published

Revision ID: 0005
Revises: 0004
"""

from alembic import op
import sqlalchemy as sa


revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None

COLUMNS = "question_id, project_id, task_id, pushed_at"


def _rebuild(primary_key: list[str], with_round: bool, rows: str) -> None:
    """A new review_tasks with `primary_key`, filled from the old one (SQLite cannot change a key in place)."""
    columns = [sa.Column('question_id', sa.String(length=64), nullable=False)]
    if with_round:
        columns.append(sa.Column('round', sa.String(length=64), server_default='', nullable=False))
    op.create_table('review_tasks_next', *columns,
                    sa.Column('project_id', sa.Integer(), nullable=False),
                    sa.Column('task_id', sa.Integer(), nullable=True),
                    sa.Column('pushed_at', sa.DateTime(timezone=True), nullable=False),
                    sa.PrimaryKeyConstraint(*primary_key))
    op.execute(rows)
    op.drop_table('review_tasks')
    op.rename_table('review_tasks_next', 'review_tasks')


def upgrade() -> None:
    _rebuild(['question_id', 'round'], True,
             f"INSERT INTO review_tasks_next ({COLUMNS}, round) SELECT {COLUMNS}, '' FROM review_tasks")


def downgrade() -> None:
    _rebuild(['question_id'], False,
             f"INSERT INTO review_tasks_next ({COLUMNS}) SELECT {COLUMNS} FROM review_tasks WHERE round = ''")
