#!/usr/bin/env bash
# Collect the shards' results of the stampede Job from their pods' logs into DIR, then merge:
#   deploy/kubernetes/collect.sh DIR [JOB] [SHARDS]
# Needs kubectl (pointed at the cluster) and stampede on this machine.
set -euo pipefail
dir=${1:?usage: collect.sh DIR [JOB] [SHARDS]}
job=${2:-stampede}
shards=${3:-4}
mkdir -p "$dir"
kubectl wait --for=condition=complete --timeout=30m "job/$job" \
  || echo "job/$job did not complete: merging what the pods wrote" >&2
for ((i = 0; i < shards; i++)); do
  pod=$(kubectl get pods -l "job-name=$job,batch.kubernetes.io/job-completion-index=$i" \
    -o jsonpath='{.items[0].metadata.name}')
  kubectl logs "$pod" \
    | sed -n '/^STAMPEDE-RESULT-BEGIN$/,/^STAMPEDE-RESULT-END$/p' | sed '1d;$d' \
    > "$dir/shard-$i.json"
  [ -s "$dir/shard-$i.json" ] || { echo "shard $i ($pod) printed no result" >&2; rm -f "$dir/shard-$i.json"; }
done
stampede merge "$dir" --out "$dir/merged.json"
