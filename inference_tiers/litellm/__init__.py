"""The LiteLLM proxy's configuration, rendered from typed model targets by pure functions (no AWS, no CDK scope).

``config``: ``config.yaml`` (model_list, router_settings, litellm_settings, general_settings) and the container
command; ``database``: the SQL that provisions the proxy's own PostgreSQL role and database.
"""
