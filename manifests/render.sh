#!/usr/bin/env bash
# Renders manifests/install.yaml from the Helm chart, to stdout: the release
# "retwatch" in the namespace retwatch, with its Namespace and the CRD; each
# agent makes its own /metrics certificate (a Secret of the chart's would be
# a new key at each render, and the same one in every copy of this file).
# `make manifests` writes it; tests/agent/test_install.py checks that the
# committed file is what this prints.
#
# helm is $HELM, else the one tests/helm/build.sh builds (cached).
# Usage: render.sh > install.yaml
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
helm=${HELM:-}
if [[ -z $helm ]]; then
    bindir=$("$repo/tests/helm/build.sh" | tail -n 1)
    helm=$bindir/helm
fi

err=$(mktemp)
trap 'rm -f "$err"' EXIT
cat <<'EOF'
# retwatch: the FunctionProbe CRD and retwatch-agent, a DaemonSet in the
# namespace retwatch, with the RBAC it needs.
#
#   kubectl apply -f manifests/install.yaml
#
# Generated from charts/retwatch by `make manifests`: do not edit, change the
# chart (charts/retwatch/README.md describes it and its values).
EOF
if ! "$helm" template retwatch "$repo/charts/retwatch" --namespace retwatch \
    --include-crds --set namespace.create=true --set metrics.tls.certificate=agent 2>"$err"; then
    cat "$err" >&2
    exit 1
fi
# helm says, every time, that it followed the chart's symlink to the CRD
grep -v 'found symbolic link in path' "$err" >&2 || true
