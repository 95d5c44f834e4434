#!/bin/bash
# HyperPod runs this once on every new instance (LifeCycleConfig.OnCreate), from a local copy of the S3 prefix.
# It runs on_create_main.sh next to it and keeps the output in /var/log/provision/provisioning.log. On failure
# it waits a minute so the log reaches CloudWatch (/aws/sagemaker/Clusters/<cluster>/<id>) before HyperPod
# replaces the instance, then fails so HyperPod reports "Lifecycle scripts did not run successfully".
set -uo pipefail

LOG_DIR=/var/log/provision
mkdir -p "$LOG_DIR"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

if [ ! -f "$HERE/on_create_main.sh" ]; then
  echo "on_create.sh: $HERE/on_create_main.sh is missing (upload both scripts)" | tee -a "$LOG_DIR/provisioning.log"
  sleep 60
  exit 1
fi

if bash "$HERE/on_create_main.sh" >>"$LOG_DIR/provisioning.log" 2>&1; then
  echo "on_create.sh: done" | tee -a "$LOG_DIR/provisioning.log"
else
  status=$?
  echo "on_create.sh: on_create_main.sh failed with exit code $status" | tee -a "$LOG_DIR/provisioning.log"
  sleep 60
  exit "$status"
fi
