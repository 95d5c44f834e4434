"""The Alertmanager definition of an AMP workspace: every alert to one KMS-encrypted SNS topic.

AMP accepts only SNS receivers (``sns_configs`` with ``sigv4``; ``api_url``/``http_config`` are rejected) and
wraps the Alertmanager configuration in ``alertmanager_config`` (AMP user guide, "Alertmanager configuration").
The topic ARN and Region may be deploy-time tokens: they are embedded in the text unparsed and CloudFormation
joins them in.
"""

from __future__ import annotations

import yaml

from inference_tiers.validation import Args

_SNS_ARN = r"arn:aws(-[a-z-]+)?:sns:[a-z0-9-]{1,20}:[0-9]{12}:[A-Za-z0-9_-]{1,256}"


def alertmanager_config(topic_arn: str, region: str) -> dict[str, object]:
    """The inner Alertmanager configuration (what ``amtool check-config`` reads)."""
    args = Args("alertmanager_config")
    args.text("topic_arn", topic_arn, pattern=_SNS_ARN, description="an SNS topic ARN")
    args.text(
        "region", region, pattern=r"[a-z]{2}(-[a-z]+)+-[0-9]", description="an AWS Region such as us-east-1"
    )
    return {
        "route": {
            "receiver": "sns",
            # one notification per alert and what it is about, not one per series
            "group_by": ["alertname", "model_name", "requested_model", "Hostname", "instance"],
            "group_wait": "30s",
            "group_interval": "5m",
            "repeat_interval": "4h",
        },
        "inhibit_rules": [
            # while a target is down its alerts' metrics are stale: page for the outage only
            {
                "source_matchers": ["alertname = ScrapeTargetDown"],
                "target_matchers": ["severity = warning"],
                "equal": ["instance"],
            }
        ],
        "receivers": [
            {
                "name": "sns",
                "sns_configs": [
                    {
                        "topic_arn": topic_arn,
                        "sigv4": {"region": region},
                        "subject": "[{{ .Status | toUpper }}] {{ .CommonLabels.alertname }}",
                        "attributes": {"severity": "{{ .CommonLabels.severity }}"},
                    }
                ],
            }
        ],
    }


def alertmanager_definition(topic_arn: str, region: str) -> str:
    """The workspace's ``AlertManagerDefinition`` text (YAML with the configuration as a block string)."""
    inner = yaml.safe_dump(alertmanager_config(topic_arn, region), sort_keys=False, width=1000)
    return "alertmanager_config: |\n" + "".join(f"  {line}\n" for line in inner.splitlines())
