"""Pure renderers of Kubernetes manifests (plain dicts, no CDK), so they can be tested and validated alone."""
