"""Local storage: SQLAlchemy models, the unit of work and Alembic migrations."""
