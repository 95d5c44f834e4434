#!/bin/bash
# Instance setup for inference nodes, run by on_create.sh. Kept deliberately small: the HyperPod EKS AMI
# already has the NVIDIA driver, EFA, containerd and kubelet, and the dependency Helm chart supplies the
# device plugins. Add site-specific setup (proxy, extra packages) here; keep it idempotent.
set -euxo pipefail

# Record what the node looks like for troubleshooting (IMDSv2 only).
token="$(curl -sS -X PUT http://169.254.169.254/latest/api/token -H 'X-aws-ec2-metadata-token-ttl-seconds: 300')"
curl -sS -H "X-aws-ec2-metadata-token: $token" http://169.254.169.254/latest/meta-data/instance-type; echo
lsblk
df -h

# HyperPod mounts the group's extra EBS volume at /opt/sagemaker: report it, since container images
# (vLLM is ~10 GB) and logs need the space.
if mountpoint -q /opt/sagemaker; then
  df -h /opt/sagemaker
else
  echo "no secondary volume mounted at /opt/sagemaker"
fi
