#!/usr/bin/env bash
# The README's first command (make run): Tessera sharing one GPU, in about
# fifteen seconds, with no GPU needed. It starts the host daemon on one
# simulated H200 and a throwaway state folder, submits three jobs whose
# guaranteed shares fill the GPU (each with its own burst limit and memory
# cap) and a fourth that must wait, shows them sharing the GPU (tessera ps,
# queue, ps --gpus), shows the fourth starting when the first leaves room, and
# stops the daemon. Exits 0 only when every job succeeded.
#
# Every CLI call goes to the daemon's unix socket (TESSERA_SOCKET), never to
# its --http address, which is only printed for the status page.
#
#   scripts/demo.sh [BINARY]        default bin/tessera
#   TESSERA_DEMO_SIMULATE=1xH100    another simulated GPU (default 1xH200)
#   TESSERA_DEMO_HTTP=ADDR          status page address (default 127.0.0.1:9400,
#                                   else the next free port up to 9409; "off": none)
#   TESSERA_DEMO_RECORDS=FILE       also write the jobs' final records there
#                                   (tessera ps -a -o json), for tests
set -euo pipefail

bin=${1:-bin/tessera}
case $bin in */*) ;; *) bin=./$bin ;; esac
sim=${TESSERA_DEMO_SIMULATE:-1xH200}
state=$(mktemp -d "${TMPDIR:-/tmp}/tessera-demo.XXXXXX")
export TESSERA_STATE_DIR=$state TESSERA_SOCKET=$state/tessera.sock
daemon=
ids=()

t() { "$bin" "$@"; }
say() { printf '\n==> %s\n' "$*"; }
# show runs a tessera command the way a user would type it.
show() {
	printf '\n$ tessera %s\n' "$*"
	t "$@"
}
# count STATE...: how many of the daemon's jobs are in one of the STATEs;
# state_of JOB: a job's state (the first two columns of tessera ps -a).
count() { t ps -a | awk -v s=" $* " 'NR > 1 && index(s, " " $2 " ") { n++ } END { print n + 0 }'; }
state_of() { t ps -a | awk -v id="$1" 'NR > 1 && $1 == id { print $2 }'; }
no_live_jobs() { [ "$(count running queued)" = 0 ]; }
running_is() { [ "$(count running)" = "$1" ]; }
started() { [ "$(state_of "$1")" != queued ]; }
# wait_until WHAT SECONDS COMMAND...: poll until COMMAND succeeds.
wait_until() {
	local what=$1 secs=$2
	shift 2
	for _ in $(seq 1 $((secs * 10))); do
		"$@" && return 0
		if [ "${#ids[@]}" != 0 ] && [ "$(count failed stopped lost preempted)" != 0 ]; then
			echo "demo: a job ended badly while waiting for $what:" >&2
			t ps -a >&2 || true
			return 1
		fi
		if [ -n "$daemon" ] && ! kill -0 "$daemon" 2>/dev/null; then
			echo "demo: the daemon exited while waiting for $what; its output:" >&2
			cat "$state/daemon.log" >&2
			return 1
		fi
		sleep 0.1
	done
	echo "demo: gave up waiting for $what after ${secs}s" >&2
	t ps -a >&2 || true
	return 1
}

cleanup() {
	local rc=$?
	if [ -n "$daemon" ] && kill -0 "$daemon" 2>/dev/null; then
		# Jobs outlive their daemon by design: stop any still live first.
		if ! no_live_jobs; then
			t stop "${ids[@]}" >/dev/null 2>&1 || true
			ids=() # stopped is expected now
			wait_until "the jobs to stop" 15 no_live_jobs >/dev/null 2>&1 || true
		fi
		kill "$daemon" 2>/dev/null || true
		wait "$daemon" 2>/dev/null || true
	fi
	rm -rf "$state"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The status page, on a loopback port that nobody listens on yet.
http=${TESSERA_DEMO_HTTP:-}
if [ -z "$http" ]; then
	for port in $(seq 9400 9409); do
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
			http=127.0.0.1:$port
			break
		fi
	done
fi
[ "$http" = off ] && http=

start_daemon() {
	"$bin" up --simulate "$sim" --log-level warn ${http:+--http "$http"} >"$state/daemon.log" 2>&1 &
	daemon=$!
	wait_until "the daemon to answer on $TESSERA_SOCKET" 30 answers
}
answers() { t ps >/dev/null 2>&1; }
say "Starting the host daemon on one simulated GPU (no GPU needed): tessera up --simulate $sim${http:+ --http $http}"
if ! start_daemon; then
	# Someone may have taken the port between our check and the daemon's bind.
	[ -n "$http" ] && ! kill -0 "$daemon" 2>/dev/null || exit 1
	echo "note: could not serve the status page on $http; going on without it"
	http=
	start_daemon
fi
sed 's/^/    /' "$state/daemon.log"

# name, sleep seconds, then tessera run's flags. The first three guarantees
# add up to the whole GPU; the fourth job cannot fit until the first ends.
jobs=(
	"train    6  --gpu-fraction 0.5  --gpu-limit 0.8 --gpu-memory 40Gi --gpu-memory-limit 60Gi"
	"notebook 10 --gpu-fraction 0.25 --gpu-limit 1   --gpu-memory 20Gi"
	"eval     10 --gpu-fraction 0.25 --gpu-limit 0.5 --gpu-memory 20Gi"
	"batch    3  --gpu-fraction 0.5                  --gpu-memory 40Gi"
)
say "Submitting four jobs, in this order (tessera run -d FLAGS -- sh -c 'sleep N; echo ...'):"
for j in "${jobs[@]}"; do
	read -r name secs flags <<<"$j"
	# shellcheck disable=SC2086 # flags are words on purpose
	id=$(t run -d $flags -- sh -c "sleep $secs; echo \"$name"' ($TESSERA_JOB_ID) ran on $CUDA_VISIBLE_DEVICES: guaranteed $TESSERA_COMPUTE_REQUEST of its compute, may burst to $TESSERA_COMPUTE_LIMIT, memory capped at $TESSERA_MEMORY_LIMIT"')
	ids+=("$id")
	printf '    %-6s %-9s %s, runs %ss\n' "$id" "$name" "$(echo $flags)" "$secs"
done
first=${ids[0]} last=${ids[3]}

wait_until "three jobs running and one queued" 30 running_is 3
say "Three jobs share GPU 0 at once (their guarantees fill it; each may burst up to its limit when the others idle):"
show ps
show queue
show ps --gpus
running_at_once=$(count running)

say "Waiting for $first (train) to finish: $last (batch) starts in the room it leaves..."
wait_until "$last to start" 60 started "$last"
show ps

wait_until "every job to end" 60 no_live_jobs
say "Every job has ended; what each printed (tessera logs JOB):"
for id in "${ids[@]}"; do
	t logs "$id" | sed 's/^/    /'
done
show ps -a
if [ -n "${TESSERA_DEMO_RECORDS:-}" ]; then
	t ps -a -o json >"$TESSERA_DEMO_RECORDS"
fi

failed=0
for id in "${ids[@]}"; do
	s=$(state_of "$id")
	if [ "$s" != succeeded ]; then
		echo "demo: $id ended $s" >&2
		failed=1
	fi
done
if [ "$failed" != 0 ]; then
	echo "demo: FAILED: not every job succeeded (see above)" >&2
	exit 1
fi

say "Done: ${#ids[@]} jobs, $running_at_once at once on one GPU; $last waited for room, then ran."
cat <<EOF
${http:+The dashboard was at http://$http/ while the daemon ran (tessera up --http; docs/dashboard.md).
}Try next:
    ./bin/tessera up &                  # the daemon on this host's GPUs (NVML), else a simulated 8xH200
    ./bin/tessera run --gpu-fraction 0.25 --gpu-limit 0.8 --gpu-memory 20Gi -- python train.py
    ./bin/tessera ps --gpus             # live free shares and memory per GPU; tessera queue: who waits, and why
    ./bin/tessera version               # what you are running
Docs: docs/host.md (one host: flags, queues, preemption); README.md (Kubernetes, the trace simulator).
EOF
