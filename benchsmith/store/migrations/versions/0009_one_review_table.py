"""one review table: conversations' review versions join the questions' reviews, each row naming its kind;
every distinct version of an annotation is kept, with when Label Studio saved it

Revision ID: 0009
Revises: 0008
"""

from alembic import op
import sqlalchemy as sa


revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None

When = sa.DateTime(timezone=True)
COMMON = 'task_id, annotation_id, annotator, keep, reasons, comment, submitted_at, created_at'


def upgrade() -> None:
    op.drop_index('ix_reviews_question_id', table_name='reviews')
    with op.batch_alter_table('reviews') as batch:
        batch.alter_column('question_id', new_column_name='subject_id', existing_type=sa.String(length=64),
                           existing_nullable=False)
        batch.add_column(sa.Column('kind', sa.String(length=16), server_default='question', nullable=False))
        batch.add_column(sa.Column('turns', sa.JSON(), nullable=True))
        batch.add_column(sa.Column('submitted_at', When, nullable=True))
    op.execute('UPDATE reviews SET submitted_at = created_at')  # the last pull that saw it: no earlier time is known
    with op.batch_alter_table('reviews') as batch:
        batch.alter_column('submitted_at', existing_type=When, nullable=False)
    op.create_index(op.f('ix_reviews_subject_id'), 'reviews', ['subject_id'], unique=False)
    op.execute(f"INSERT INTO reviews (id, kind, subject_id, turns, {COMMON}) "
               f"SELECT id, 'conversation', conversation_id, turns, {COMMON} FROM conversation_reviews")
    op.drop_index('ix_conversation_reviews_conversation_id', table_name='conversation_reviews')
    op.drop_table('conversation_reviews')


def downgrade() -> None:
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
    sa.Column('submitted_at', When, nullable=False),
    sa.Column('created_at', When, nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index(op.f('ix_conversation_reviews_conversation_id'), 'conversation_reviews', ['conversation_id'],
                    unique=False)
    op.execute(f"INSERT INTO conversation_reviews (id, conversation_id, turns, {COMMON}) "
               f"SELECT id, subject_id, turns, {COMMON} FROM reviews WHERE kind = 'conversation'")
    op.execute("DELETE FROM reviews WHERE kind = 'conversation'")
    op.drop_index(op.f('ix_reviews_subject_id'), table_name='reviews')
    with op.batch_alter_table('reviews') as batch:
        batch.drop_column('submitted_at')
        batch.drop_column('turns')
        batch.drop_column('kind')
        batch.alter_column('subject_id', new_column_name='question_id', existing_type=sa.String(length=64),
                           existing_nullable=False)
    op.create_index('ix_reviews_question_id', 'reviews', ['question_id'], unique=False)
