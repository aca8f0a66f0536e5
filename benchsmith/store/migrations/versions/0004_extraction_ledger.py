"""extraction on the work ledger: `extractions` rows become ledger rows of stage `extract`

Each (item, extractor key) row is carried over as (stage 'extract', config_key = the extractor key,
subject = the item id) with its status and reason; its fact count and seconds go into `details`.
Config keys grow to 200 characters, as long as the extractor keys they now hold.

Revision ID: 0004
Revises: 0003
"""

from alembic import op
import sqlalchemy as sa


revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('work_ledger') as batch:
        batch.alter_column('config_key', existing_type=sa.String(length=64), type_=sa.String(length=200),
                           existing_nullable=False)
    conn = op.get_bind()
    old = sa.table('extractions', sa.column('item_id'), sa.column('extractor'), sa.column('status'),
                   sa.column('reason'), sa.column('n_facts'), sa.column('seconds'), sa.column('created_at'))
    ledger = sa.table('work_ledger', sa.column('stage'), sa.column('config_key'), sa.column('subject'),
                      sa.column('status'), sa.column('reason'), sa.column('details', sa.JSON),
                      sa.column('created_at'))
    rows = [{"stage": "extract", "config_key": r.extractor, "subject": r.item_id, "status": r.status,
             "reason": r.reason or "", "details": {"n_facts": r.n_facts, "seconds": r.seconds},
             "created_at": r.created_at} for r in conn.execute(sa.select(old))]
    for start in range(0, len(rows), 1000):
        conn.execute(ledger.insert(), rows[start:start + 1000])
    op.drop_table('extractions')


def downgrade() -> None:
    op.create_table('extractions',
    sa.Column('item_id', sa.String(length=64), nullable=False),
    sa.Column('extractor', sa.String(length=200), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('reason', sa.Text(), server_default='', nullable=False),
    sa.Column('n_facts', sa.Integer(), server_default='0', nullable=False),
    sa.Column('seconds', sa.Float(), server_default='0', nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('item_id', 'extractor')
    )
    conn = op.get_bind()
    ledger = sa.table('work_ledger', sa.column('stage'), sa.column('config_key'), sa.column('subject'),
                      sa.column('status'), sa.column('reason'), sa.column('details', sa.JSON),
                      sa.column('created_at'))
    old = sa.table('extractions', sa.column('item_id'), sa.column('extractor'), sa.column('status'),
                   sa.column('reason'), sa.column('n_facts'), sa.column('seconds'), sa.column('created_at'))
    rows = [{"item_id": r.subject, "extractor": r.config_key, "status": r.status, "reason": r.reason,
             "n_facts": (r.details or {}).get("n_facts", 0), "seconds": (r.details or {}).get("seconds", 0.0),
             "created_at": r.created_at} for r in conn.execute(sa.select(ledger).where(ledger.c.stage == 'extract'))]
    for start in range(0, len(rows), 1000):
        conn.execute(old.insert(), rows[start:start + 1000])
    op.execute(sa.delete(ledger).where(ledger.c.stage == 'extract'))
    with op.batch_alter_table('work_ledger') as batch:
        batch.alter_column('config_key', existing_type=sa.String(length=200), type_=sa.String(length=64),
                           existing_nullable=False)
