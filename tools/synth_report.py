"""Print what `cdk synth` produced: stacks, template paths, resource counts and the cdk-nag result."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def main(outdir: str) -> int:
    root = Path(outdir)
    manifest = json.loads((root / "manifest.json").read_text())
    stacks = {
        name: artifact
        for name, artifact in manifest["artifacts"].items()
        if artifact["type"] == "aws:cloudformation:stack"
    }
    print(f"\nSynthesized {len(stacks)} stack(s) into {root}/:")
    for name, artifact in sorted(stacks.items()):
        template_path = root / artifact["properties"]["templateFile"]
        resources = json.loads(template_path.read_text()).get("Resources", {})
        print(f"  {name:<32} {template_path}  ({len(resources)} resources)")

    report_path = root / "validation-report.json"
    if not report_path.exists():
        print("cdk-nag: no validation report in the output: the synth did not run the validation plugins")
        return 1
    # A plugin with nothing to report leaves no entry; cdk-nag reports only findings, and an unacknowledged
    # finding fails the synth before this script runs. Warnings (annotations) are listed but don't fail.
    reports = json.loads(report_path.read_text())["pluginReports"]
    nag_reports = [r for r in reports if "AwsSolutions" in r["pluginName"]]
    print(
        f"cdk-nag AwsSolutionsChecks: {sum(len(r['violations']) for r in nag_reports)} unacknowledged finding(s)"
    )
    for report in reports:
        print(f"{report['pluginName']}: {report['conclusion']}")
        for violation in report["violations"]:
            print(
                f"  {violation['severity']}: {violation['ruleName']}: {violation.get('description', '')[:160]}"
            )
    acknowledged = _acknowledged_findings(root, stacks)
    print(f"acknowledged findings ({len(acknowledged)}), each with its reason:")
    for path, rule, reason in acknowledged:
        print(f"  {rule} on {path}\n      {reason}")
    return 0 if all(r["conclusion"] == "success" for r in reports) and not nag_reports else 1


def _acknowledged_findings(root: Path, stacks: dict[str, dict[str, Any]]) -> list[tuple[str, str, str]]:
    """(construct path, rule id, reason) for every acknowledgment recorded in the stacks' metadata."""
    found = []
    for artifact in stacks.values():
        metadata = dict(artifact.get("metadata", {}))
        if "additionalMetadataFile" in artifact:
            metadata.update(json.loads((root / artifact["additionalMetadataFile"]).read_text()))
        for path, records in metadata.items():
            for record in records:
                if record["type"] == "aws:cdk:acknowledged-rules":
                    for rule, reason in record["data"].items():
                        found.append((path, rule.removeprefix("Annotation::"), reason))
    return sorted(found)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "cdk.out"))
