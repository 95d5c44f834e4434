"""Print what `cdk synth` produced: stacks, template paths, resource counts and the cdk-nag result."""

from __future__ import annotations

import json
import sys
from pathlib import Path


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
        print("cdk-nag: no validation report found (was the AwsSolutionsChecks plugin registered?)")
        return 1
    report = json.loads(report_path.read_text())
    for plugin in report.get("pluginReports", []):
        violations = plugin.get("violations", [])
        name = plugin.get("summary", {}).get("pluginName", "plugin")
        status = "passed" if not violations else f"FAILED with {len(violations)} finding(s)"
        print(f"{name}: {status} (unacknowledged findings: {len(violations)})")
        for violation in violations:
            print(f"  {violation.get('ruleName')}: {violation.get('description', '')[:120]}")
    return 0 if all(not p.get("violations") for p in report.get("pluginReports", [])) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "cdk.out"))
