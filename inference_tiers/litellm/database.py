"""The SQL that gives the proxy its own PostgreSQL role and database, run once per deploy as the cluster's
master user before LiteLLM's migrations.

The proxy does not connect as the master user (a member of ``rds_superuser`` on Aurora): its role can log in,
owns its one database (and so, on PostgreSQL 15 and later, that database's ``public`` schema, where LiteLLM's
migrations create their tables) and nothing else; other roles lose ``CONNECT`` to it.

Each statement is a query whose result rows are the statements to run (``psql``'s ``\\gexec``): that makes
every step idempotent (``CREATE`` only when missing) and lets PostgreSQL itself quote the password
(``format('%L')``). The password is the one placeholder, spelt by the caller's driver: ``:password`` for the RDS
Data API's named parameters, ``:'password'`` for a psql variable.
"""

from __future__ import annotations

from inference_tiers.validation import Args

IDENTIFIER = r"[a-z_][a-z0-9_]{0,62}"


def bootstrap_queries(*, username: str, database: str, password_placeholder: str) -> list[str]:
    """The queries, in order, that create or update ``username`` (with the password) and ``database``."""
    args = Args("bootstrap_queries")
    user = args.text("username", username, pattern=IDENTIFIER, allow_token=False)
    name = args.text("database", database, pattern=IDENTIFIER, allow_token=False)
    args.one_of("password_placeholder", password_placeholder, (":password", ":'password'"))
    return [
        f"SELECT format('CREATE ROLE %I LOGIN', '{user}') WHERE NOT EXISTS "
        f"(SELECT FROM pg_roles WHERE rolname = '{user}')",
        # Every deploy sets the password the secret holds now (after a rotation the two already agree).
        f"SELECT format('ALTER ROLE %I WITH LOGIN NOCREATEDB NOCREATEROLE PASSWORD %L', "
        f"'{user}', {password_placeholder})",
        # The master user must be able to act as the owner to create a database for it (PostgreSQL 15+).
        f"SELECT format('GRANT %I TO CURRENT_USER', '{user}') WHERE NOT pg_has_role(CURRENT_USER, '{user}', "
        "'MEMBER')",
        f"SELECT format('CREATE DATABASE %I OWNER %I', '{name}', '{user}') WHERE NOT EXISTS "
        f"(SELECT FROM pg_database WHERE datname = '{name}')",
        f"SELECT format('REVOKE ALL ON DATABASE %I FROM PUBLIC', '{name}')",
        f"SELECT format('GRANT CONNECT, TEMPORARY ON DATABASE %I TO %I', '{name}', '{user}')",
    ]
