"""The production store: PostgreSQL through psycopg 3."""
