#!/usr/bin/env bash
# bench-host.sh [BASE [ROUNDS]]: the host daemon's benchmarks (hostd/bench_test.go)
# on this tree and on commit BASE (default: the last commit before this
# round's fault handling), in alternating rounds in one run, printed as a
# markdown table of medians with the ratio now/base.
set -euo pipefail
base=${1:-2a0f960}
rounds=${2:-6}
root=$(git rev-parse --show-toplevel)
work=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$work/base" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
git -C "$root" worktree add -q --detach "$work/base" "$base"
cp "$root/hostd/bench_test.go" "$work/base/hostd/bench_test.go"
(cd "$work/base" && go test -c -o "$work/base.test" ./hostd/)
(cd "$root" && go test -c -o "$work/now.test" ./hostd/)
for _ in $(seq "$rounds"); do
  (cd "$work/base/hostd" && "$work/base.test" -test.run '^$' -test.bench . -test.benchtime 1s >>"$work/base.txt")
  (cd "$root/hostd" && "$work/now.test" -test.run '^$' -test.bench . -test.benchtime 1s >>"$work/now.txt")
done
median() { grep "^$1-" "$2" | awk '{print $3}' | sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
echo "| benchmark | base $base (ms) | now (ms) | now / base |"
echo "|---|---|---|---|"
for b in $(grep -o '^Benchmark[A-Za-z]*' "$work/now.txt" | sort -u); do
  m0=$(median "$b" "$work/base.txt"); m1=$(median "$b" "$work/now.txt")
  awk -v b="$b" -v m0="$m0" -v m1="$m1" 'BEGIN {printf "| %s | %.2f | %.2f | %.2f |\n", b, m0/1e6, m1/1e6, m1/m0}'
done
