"""inference-tiers: deployable AWS CDK reference architectures for generative-AI inference."""

__version__ = "0.1.0"

from pathlib import Path

# Package data (Lambda handlers, Dockerfiles, lifecycle scripts, price tables): resolved from this file, never
# from the working directory, so an installed copy finds its own assets.
ASSETS_DIR = Path(__file__).resolve().parent / "assets"
