"""Alembic environment: migrations run on the connection the Store hands over."""

from alembic import context

from benchsmith.store.schema import metadata

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
