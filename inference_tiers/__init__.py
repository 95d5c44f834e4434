"""inference-tiers: deployable AWS CDK reference architectures for generative-AI inference."""

__version__ = "0.1.0"
