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

# Aurora PostgreSQL's default max_connections is LEAST(DBInstanceClassMemory / 9531392, 5000) (Aurora User Guide,
# "Maximum connections to an Aurora PostgreSQL DB instance", AuroraPostgreSQL.Managing.html); Serverless v2 takes
# the memory of the maximum ACUs, about 2 GiB each, and caps it at 2,000 when the minimum is 0 or 0.5 ACU (Aurora
# User Guide, "Maximum connections for Aurora Serverless v2", aurora-serverless-v2.setting-capacity.html).
_BYTES_PER_CONNECTION = 9_531_392
_BYTES_PER_ACU = 2 * 2**30
# The share of max_connections the proxies may hold: DBInstanceClassMemory is below the nominal memory (1 ACU
# allows 189 connections where the formula gives 225; 1-16 ACU allows 3,360 where it gives 3,604), and the
# migration task, the Data API and administrators need connections of their own.
PROXY_CONNECTION_SHARE = 0.8


def aurora_max_connections(min_capacity: float, max_capacity: float) -> int:
    """The writer's default ``max_connections`` for an Aurora PostgreSQL Serverless v2 capacity range (ACUs)."""
    connections = min(int(max_capacity * _BYTES_PER_ACU / _BYTES_PER_CONNECTION), 5000)
    return min(connections, 2000) if min_capacity <= 0.5 else connections


def proxy_connection_budget(min_capacity: float, max_capacity: float) -> int:
    """How many connections every proxy worker of every task together may open."""
    return int(aurora_max_connections(min_capacity, max_capacity) * PROXY_CONNECTION_SHARE)


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
