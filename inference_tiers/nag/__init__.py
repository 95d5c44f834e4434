"""A cdk-nag v3 rule pack for generative-AI inference: ``Validations.of(app).add_plugins(InferenceChecks(app))``.

Each rule lives in its own module under :mod:`inference_tiers.nag.rules`; docs/nag-rules.md lists them.
"""

from inference_tiers.nag.pack import InferenceChecks
from inference_tiers.nag.rule import PACK_NAME, Rule
from inference_tiers.nag.rules import RULES

__all__ = ["PACK_NAME", "RULES", "InferenceChecks", "Rule"]
