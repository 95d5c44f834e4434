"""The observability layer's constructs (renderers in :mod:`inference_tiers.observability`)."""

from inference_tiers.constructs.observability.hub import ADOT_IMAGE, ObservabilityHub

__all__ = ["ADOT_IMAGE", "ObservabilityHub"]
