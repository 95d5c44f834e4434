"""Pure renderers of Kubernetes manifests (plain dicts, no CDK), tested against the real schemas."""
