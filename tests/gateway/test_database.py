"""The proxy's database role against a real PostgreSQL: the stack's bootstrap SQL, then LiteLLM's own
migrations (litellm-proxy-extras, the release the image pins) applied in order as that role.

The test's "master" is a plain CREATEROLE/CREATEDB role, like Aurora's master user (a member of
rds_superuser, not a superuser); the proxy's role gets only what bootstrap_queries grants.
"""

from __future__ import annotations

import pytest

from inference_tiers.litellm.database import bootstrap_queries
from tests.gateway.proxy import Postgres, migrations_dir

MASTER = "cluster_master"
APP_USER = "litellm"
DATABASE = "litellm"


def run_bootstrap(postgres: Postgres, password: str = "first-password") -> None:
    script = "\n".join(
        f"{query} \\gexec"
        for query in bootstrap_queries(
            username=APP_USER, database=DATABASE, password_placeholder=":'password'"
        )
    )
    postgres.psql("-v", f"password={password}", user=MASTER, stdin=script)


@pytest.fixture(scope="module")
def bootstrapped(postgres: Postgres) -> Postgres:
    postgres.psql(stdin=f"CREATE ROLE {MASTER} LOGIN CREATEROLE CREATEDB;")
    run_bootstrap(postgres)
    run_bootstrap(postgres, password="rotated-password")  # every deploy runs it again
    return postgres


def test_bootstrap_is_idempotent_and_grants_only_the_database(bootstrapped: Postgres) -> None:
    role = bootstrapped.psql(
        "-A",
        "-t",
        "-c",
        f"SELECT rolsuper, rolcreatedb, rolcreaterole, rolcanlogin FROM pg_roles WHERE rolname = '{APP_USER}'",
    )
    assert role.strip() == "f|f|f|t"
    owner = bootstrapped.psql(
        "-A", "-t", "-c", f"SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = '{DATABASE}'"
    )
    assert owner.strip() == APP_USER
    # PUBLIC lost CONNECT: another ordinary role cannot even open the proxy's database.
    bootstrapped.psql(stdin="CREATE ROLE bystander LOGIN;")
    with pytest.raises(AssertionError, match="permission denied for database"):
        bootstrapped.psql("-c", "SELECT 1", user="bystander", database=DATABASE)


def test_the_proxy_role_cannot_reach_other_databases_objects(bootstrapped: Postgres) -> None:
    bootstrapped.psql(stdin="CREATE TABLE master_only (x int);")
    with pytest.raises(AssertionError, match="permission denied"):
        bootstrapped.psql("-c", "SELECT * FROM master_only", user=APP_USER)


def test_litellm_migrations_apply_in_order_as_the_proxy_role(bootstrapped: Postgres) -> None:
    migrations = sorted(p for p in migrations_dir().iterdir() if (p / "migration.sql").exists())
    assert len(migrations) > 100, "litellm-proxy-extras ships its whole migration history"
    # One psql session, files in order, stopping at the first error (ON_ERROR_STOP).
    files = [arg for m in migrations for arg in ("-f", str(m / "migration.sql"))]
    bootstrapped.psql(*files, user=APP_USER, database=DATABASE)
    tables = bootstrapped.psql(
        "-A",
        "-t",
        "-c",
        "SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tableowner = current_user",
        user=APP_USER,
        database=DATABASE,
    ).split()
    for table in (
        "LiteLLM_VerificationToken",
        "LiteLLM_TeamTable",
        "LiteLLM_BudgetTable",
        "LiteLLM_SpendLogs",
    ):
        assert table in tables
