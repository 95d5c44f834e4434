#!/usr/bin/env python3
"""CDK entry point: context -> validated config -> build_app -> cdk-nag -> synth. Keep it thin."""

import aws_cdk as cdk

from inference_tiers.app_factory import build_app, parse_app_config
from inference_tiers.constructs.common.nag import add_nag_checks

app = cdk.App()
build_app(app, parse_app_config(app.node.get_all_context()))
add_nag_checks(app)
app.synth()
