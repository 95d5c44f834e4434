"""Shared building blocks: retained KMS keys and encrypted topics, private buckets, the private VPC, console links, and the one cdk-nag acknowledgment helper."""
