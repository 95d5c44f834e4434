#!/usr/bin/env python3
"""CDK entry point: context -> validated config -> build_app -> cdk-nag -> synth. Keep it thin."""

import aws_cdk as cdk

from inference_tiers.app_factory import build_app, parse_app_config
from inference_tiers.config import ConfigError
from inference_tiers.constructs.common.nag import add_nag_checks
from inference_tiers.validation import ArgumentError

app = cdk.App()
try:
    build_app(app, parse_app_config(app.node.get_all_context()))
except (ConfigError, ArgumentError) as error:
    # What the user typed is wrong: the message names the key, the value and what is accepted; a traceback
    # through the library would only bury it.
    raise SystemExit(f"inference-tiers: {error}") from None
add_nag_checks(app)
app.synth()
