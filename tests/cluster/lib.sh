# shellcheck shell=bash disable=SC2034  # variables are used by the scripts sourcing this
# Shared settings and helpers for tests/cluster/* scripts. Sourced, not run.

CLUSTER_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# Pinned versions. K8S_VERSION must match the k8s-openapi feature (v1_37).
K8S_VERSION="v1.37.2"
# Publication time of K8S_VERSION on the Go module proxy (its .info "Time"),
# stamped as buildDate so builds are reproducible. gen-replaces checks it.
K8S_RELEASE_DATE="2026-10-27T12:01:04Z"
KWOK_VERSION="v0.8.0"
# Staging modules (k8s.io/api, ...) are tagged v0.<minor>.<patch>.
STAGING_VERSION="v0.${K8S_VERSION#v1.}"

CACHE_ROOT="${WASMOP_CACHE:-$HOME/.cache/wasmop}/cluster"
DEFAULT_STATE="${WASMOP_CLUSTER_STATE:-${TMPDIR:-/tmp}/wasmop-cluster}"

log() { printf '%s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# Locate the go tool; prefer PATH, then the usual install location.
find_go() {
  if [[ -n "${GO:-}" ]]; then
    [[ -x "$GO" ]] || die "GO=$GO is not an executable"
  elif command -v go >/dev/null 2>&1; then
    GO="$(command -v go)"
  elif [[ -x /usr/local/go/bin/go ]]; then
    GO=/usr/local/go/bin/go
  else
    die "the Go toolchain is required (go 1.26 or newer) but 'go' was not found on PATH or at /usr/local/go/bin/go.
       Install it from https://go.dev/dl/ or set GO=/path/to/go."
  fi
  export GO
}

need_tool() {
  local t
  for t in "$@"; do
    command -v "$t" >/dev/null 2>&1 || die "required tool '$t' not found on PATH (Debian: apt-get install $(tool_pkg "$t"))"
  done
}

tool_pkg() {
  case "$1" in
    openssl) echo openssl ;;
    curl) echo curl ;;
    setsid) echo util-linux ;;
    sha256sum | timeout) echo coreutils ;;
    *) echo "$1" ;;
  esac
}

# Parse a "--state DIR" / "--state=DIR" option out of "$@". Sets STATE and the
# array REST with the remaining arguments.
parse_state() {
  STATE="$DEFAULT_STATE"
  REST=()
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --state) [[ $# -ge 2 ]] || die "--state needs a directory"; STATE="$2"; shift 2 ;;
      --state=*) STATE="${1#--state=}"; shift ;;
      *) REST+=("$1"); shift ;;
    esac
  done
  [[ -n "$STATE" ]] || die "empty state directory"
  # Absolute path: it is embedded in process command lines to recognise them.
  mkdir -p "$(dirname "$STATE")"
  STATE="$(cd "$(dirname "$STATE")" && pwd)/$(basename "$STATE")"
}

# Component names in start order.
COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)

# pid_alive STATE NAME -> prints pid and returns 0 if the recorded process for
# NAME is alive and still is the one we started (its command line mentions
# the state dir).
pid_alive() {
  local state="$1" name="$2" pid
  [[ -f "$state/$name.pid" ]] || return 1
  pid="$(cat "$state/$name.pid" 2>/dev/null)" || return 1
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  pid_is_ours "$state" "$pid" || return 1
  printf '%s\n' "$pid"
}

pid_is_ours() {
  local state="$1" pid="$2" cmdline stat
  [[ -r "/proc/$pid/cmdline" ]] || return 1
  # A zombie is not alive.
  stat="$(cat "/proc/$pid/stat" 2>/dev/null)" || return 1
  stat="${stat##*) }"
  [[ "${stat%% *}" != Z ]] || return 1
  cmdline="$(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline")" || return 1
  [[ "$cmdline" == *"$state/"* ]]
}

# ---------------------------------------------------------------------------
# Cluster state: everything lives in $STATE (absolute path).
#   .wasmop-cluster   marker (down refuses to delete a dir without it)
#   ports             sourceable KEY=VALUE: chosen loopback ports
#   env               sourceable: KUBECONFIG, KUBECTL, URLs, ports
#   kubeconfig        admin kubeconfig (client cert, O=system:masters)
#   bin -> <cache>/bin  the binaries, started as $STATE/bin/<name>
#   pki/              CA, apiserver serving cert, client certs, SA key pair
#   kubeconfigs/      controller-manager and scheduler kubeconfigs
#   etcd/             etcd data dir
#   kwok/             kwok workdir and stages.yaml
#   logs/<name>.log   one log per component (appended across restarts)
#   <name>.pid        pid of each running component

SERVICE_CIDR="10.0.0.0/24"
SERVICE_IP="10.0.0.1"
POD_CIDR="10.244.0.0/16"
NODE_COUNT=3
NODE_PODS="${WASMOP_CLUSTER_NODE_PODS:-110}"
[[ "$NODE_PODS" =~ ^[1-9][0-9]*$ ]] || { echo "error: WASMOP_CLUSTER_NODE_PODS must be a positive number, not '$NODE_PODS'" >&2; exit 2; }
READY_TIMEOUT="${WASMOP_CLUSTER_TIMEOUT:-120}"

port_in_use() {
  ss -Htln "sport = :$1" 2>/dev/null | grep -q .
}

# pick_port USED... -> a free loopback port not in USED, away from the
# ephemeral range (32768-60999) so outgoing connections do not take it.
pick_port() {
  local p i used=" $* "
  for ((i = 0; i < 200; i++)); do
    p=$((20000 + (RANDOM * 32768 + RANDOM) % 12000))
    [[ "$used" == *" $p "* ]] && continue
    port_in_use "$p" && continue
    echo "$p"
    return 0
  done
  die "could not find a free port in 20000-31999"
}

load_ports() {
  [[ -f "$STATE/ports" ]] || die "$STATE/ports missing: is $STATE a cluster started by tests/cluster/up?"
  # shellcheck source=/dev/null
  source "$STATE/ports"
}

# start_proc NAME CMD... : start CMD detached (own session, stdin from
# /dev/null, output appended to logs/NAME.log); the pid is written to
# NAME.pid by the process itself just before exec, so it is exact.
start_proc() {
  local name="$1" i
  shift
  local logf="$STATE/logs/$name.log"
  rm -f "$STATE/$name.pid"
  printf '=== %s starting: %s\n' "$(date -u +%FT%TZ)" "$*" >>"$logf"
  (
    cd "$STATE" || exit 1
    # shellcheck disable=SC2016  # $$ and $@ belong to the inner bash
    exec setsid bash -c 'echo $$ >"$0.tmp" && mv "$0.tmp" "$0" && exec "$@"' "$STATE/$name.pid" "$@"
  ) </dev/null >>"$logf" 2>&1 9>&- &
  for ((i = 0; i < 100; i++)); do
    [[ -s "$STATE/$name.pid" ]] && return 0
    sleep 0.05
  done
  die "$name: did not start (no pid file); see $logf"
}

# component_cmd NAME: sets the array CMD to NAME's command line.
component_cmd() {
  local b="$STATE/bin" pki="$STATE/pki" kc="$STATE/kubeconfigs"
  case "$1" in
    etcd)
      CMD=("$b/etcd" --name=wasmop --data-dir="$STATE/etcd"
        --listen-client-urls="http://127.0.0.1:$ETCD_PORT"
        --advertise-client-urls="http://127.0.0.1:$ETCD_PORT"
        --listen-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT"
        --initial-advertise-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT"
        --initial-cluster="wasmop=http://127.0.0.1:$ETCD_PEER_PORT"
        --initial-cluster-state=new
        --unsafe-no-fsync --log-level=warn)
      ;;
    kube-apiserver)
      # shellcheck disable=SC2054  # --authorization-mode takes a comma list
      CMD=("$b/kube-apiserver"
        --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$APISERVER_PORT"
        # A loopback advertise address is refused by the endpoint reconciler;
        # nothing in this cluster reaches the apiserver through its Service IP.
        --endpoint-reconciler-type=none
        --etcd-servers="http://127.0.0.1:$ETCD_PORT"
        --cert-dir="$pki" --tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key"
        --client-ca-file="$pki/ca.crt"
        --service-account-issuer="https://kubernetes.default.svc.cluster.local"
        --service-account-key-file="$pki/sa.pub"
        --service-account-signing-key-file="$pki/sa.key"
        --service-cluster-ip-range="$SERVICE_CIDR"
        --authorization-mode=Node,RBAC
        --allow-privileged=true --profiling=false
        # Pod Security (baseline by default, admission.yaml) and owner references that
        # block an owner's deletion only from who may set the owner's finalizers.
        --enable-admission-plugins=OwnerReferencesPermissionEnforcement
        --admission-control-config-file="$STATE/admission.yaml"
        # Who wrote what (audit-policy.yaml): tests read logs/audit.log.
        --audit-policy-file="$STATE/audit-policy.yaml" --audit-log-path="$STATE/logs/audit.log"
        --audit-log-mode=batch --audit-log-maxsize=200 --audit-log-maxbackup=1
        # Without this, watches held by the controller manager, scheduler and
        # kwok keep a TERMed apiserver alive for its 60s shutdown timeout.
        --shutdown-watch-termination-grace-period=5s
        # Front-proxy (request header) CA: none of our certs has this CN; it
        # only keeps delegated authn in the other components from complaining.
        --requestheader-client-ca-file="$pki/ca.crt" --requestheader-allowed-names=front-proxy-client
        --requestheader-username-headers=X-Remote-User --requestheader-group-headers=X-Remote-Group
        --requestheader-extra-headers-prefix=X-Remote-Extra-)
      ;;
    kube-controller-manager)
      CMD=("$b/kube-controller-manager"
        --kubeconfig="$kc/controller-manager.kubeconfig"
        --authentication-kubeconfig="$kc/controller-manager.kubeconfig"
        --authorization-kubeconfig="$kc/controller-manager.kubeconfig"
        --bind-address=127.0.0.1 --secure-port="$KCM_PORT" --cert-dir="$STATE/serving/kube-controller-manager"
        --leader-elect=false
        --service-account-private-key-file="$pki/sa.key"
        --root-ca-file="$pki/ca.crt"
        --cluster-signing-cert-file="$pki/ca.crt" --cluster-signing-key-file="$pki/ca.key"
        --use-service-account-credentials=true
        --service-cluster-ip-range="$SERVICE_CIDR"
        --kube-api-qps=1000 --kube-api-burst=2000
        --profiling=false)
      ;;
    kube-scheduler)
      CMD=("$b/kube-scheduler"
        --kubeconfig="$kc/scheduler.kubeconfig"
        --authentication-kubeconfig="$kc/scheduler.kubeconfig"
        --authorization-kubeconfig="$kc/scheduler.kubeconfig"
        --bind-address=127.0.0.1 --secure-port="$SCHEDULER_PORT" --cert-dir="$STATE/serving/kube-scheduler"
        --leader-elect=false --profiling=false
        # The default 50 requests/s binds 3,000 pods in a minute: tests at size would
        # measure the scheduler, not the operator.
        --kube-api-qps=1000 --kube-api-burst=2000)
      ;;
    kwok)
      # KWOK_WORKDIR/HOME: keep kwok away from ~/.kwok/kwok.yaml.
      CMD=(env "KWOK_WORKDIR=$STATE/kwok" "HOME=$STATE/kwok"
        "$b/kwok" --kubeconfig="$STATE/kubeconfig" --config="$STATE/kwok/stages.yaml"
        --manage-all-nodes=true --server-address="127.0.0.1:$KWOK_PORT"
        --cidr="$POD_CIDR" --node-ip=127.0.0.1 --node-lease-duration-seconds=40)
      ;;
    *) die "unknown component: $1" ;;
  esac
}

start_component() {
  component_cmd "$1"
  start_proc "$1" "${CMD[@]}"
}

# component_ready NAME: one non-blocking readiness probe.
component_ready() {
  local out
  case "$1" in
    etcd)
      out="$(curl -sf --max-time 2 "http://127.0.0.1:$ETCD_PORT/health" 2>/dev/null)" || return 1
      [[ "$out" == *'"health":"true"'* ]]
      ;;
    kube-apiserver)
      out="$(curl -sf --max-time 3 --cacert "$STATE/pki/ca.crt" --cert "$STATE/pki/admin.crt" \
        --key "$STATE/pki/admin.key" "https://127.0.0.1:$APISERVER_PORT/readyz" 2>/dev/null)" || return 1
      [[ "$out" == ok ]]
      ;;
    kube-controller-manager) [[ "$(curl -skf --max-time 2 "https://127.0.0.1:$KCM_PORT/healthz" 2>/dev/null)" == ok ]] ;;
    kube-scheduler) [[ "$(curl -skf --max-time 2 "https://127.0.0.1:$SCHEDULER_PORT/healthz" 2>/dev/null)" == ok ]] ;;
    kwok) [[ "$(curl -sf --max-time 2 "http://127.0.0.1:$KWOK_PORT/healthz" 2>/dev/null)" == ok ]] ;;
    *) return 1 ;;
  esac
}

component_fail() {
  local name="$1" why="$2" logf="$STATE/logs/$1.log"
  log "error: $name $why"
  log "---- last lines of $logf ----"
  tail -n 25 "$logf" >&2 2>/dev/null || true
  log "---- full log: $logf ----"
}

# wait_ready NAME [TIMEOUT]: wait until NAME answers its health probe; fail
# fast (with its log) if its process exits.
wait_ready() {
  local name="$1" timeout="${2:-$READY_TIMEOUT}" deadline
  deadline=$((SECONDS + timeout))
  while ! component_ready "$name"; do
    if ! pid_alive "$STATE" "$name" >/dev/null; then
      component_fail "$name" "exited before becoming ready"
      return 1
    fi
    if ((SECONDS >= deadline)); then
      component_fail "$name" "did not become ready within ${timeout}s"
      return 1
    fi
    sleep 0.2
  done
}

# wait_for DESC TIMEOUT COMPONENT CMD... : poll CMD until it succeeds.
wait_for() {
  local desc="$1" timeout="$2" comp="$3" deadline
  shift 3
  deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then
      component_fail "$comp" "(while waiting for: $desc, ${timeout}s)"
      return 1
    fi
    sleep 0.3
  done
}

kubectl_state() {
  KUBECONFIG="$STATE/kubeconfig" "$STATE/bin/kubectl" --request-timeout=10s "$@"
}

# stop_components TIMEOUT NAME...: TERM them all, wait up to TIMEOUT seconds,
# KILL what is left. NAME "stray" means: any process whose argv[0] lies in
# $STATE/bin/ but has no pid file (should not happen; belt and braces).
# Adds the number of processes stopped to STOPPED_COUNT.
stop_components() {
  local timeout="$1" name pid i n=0 left
  shift
  local -a pids=() names=()
  for name in "$@"; do
    [[ "$name" != stray ]] || continue
    if pid="$(pid_alive "$STATE" "$name")"; then
      pids+=("$pid")
      names+=("$name")
    elif [[ -f "$STATE/$name.pid" ]]; then
      log "$name: not running (stale pid $(cat "$STATE/$name.pid" 2>/dev/null || true))"
      rm -f "$STATE/$name.pid"
    fi
  done
  if [[ "$*" == stray ]]; then
    for pid in $(stray_pids); do
      pids+=("$pid")
      names+=("stray")
    done
  fi
  for i in "${!pids[@]}"; do kill -TERM "${pids[$i]}" 2>/dev/null || true; done
  for ((n = 0; n < timeout * 10; n++)); do
    left=0
    for pid in "${pids[@]}"; do pid_is_ours "$STATE" "$pid" && left=1; done
    ((left)) || break
    sleep 0.1
  done
  for i in "${!pids[@]}"; do
    if pid_is_ours "$STATE" "${pids[$i]}"; then
      log "${names[$i]}: pid ${pids[$i]} still running after ${timeout}s, sending KILL"
      kill -KILL "${pids[$i]}" 2>/dev/null || true
    fi
  done
  local failed=0
  for i in "${!pids[@]}"; do
    for ((n = 0; n < 50; n++)); do
      pid_is_ours "$STATE" "${pids[$i]}" || break
      sleep 0.1
    done
    if pid_is_ours "$STATE" "${pids[$i]}"; then
      log "${names[$i]}: pid ${pids[$i]} could not be stopped"
      failed=1
    else
      log "${names[$i]}: stopped (pid ${pids[$i]})"
      [[ "${names[$i]}" == stray ]] || rm -f "$STATE/${names[$i]}.pid"
    fi
  done
  STOPPED_COUNT=$((${STOPPED_COUNT:-0} + ${#pids[@]}))
  return "$failed"
}

# Processes started from $STATE/bin/ that have no (or a wrong) pid file.
stray_pids() {
  local d pid argv0
  for d in /proc/[0-9]*; do
    pid="${d#/proc/}"
    [[ "$pid" == "$$" ]] && continue
    argv0="$(tr '\0' '\n' 2>/dev/null <"$d/cmdline" | head -n1)" || continue
    [[ "$argv0" == "$STATE/bin/"* ]] || continue
    pid_is_ours "$STATE" "$pid" && echo "$pid"
  done
}

# RSS of the running components in KiB (sum of VmRSS).
components_rss_kb() {
  local name pid sum=0 kb
  for name in "${COMPONENTS[@]}"; do
    pid="$(pid_alive "$STATE" "$name")" || continue
    kb="$(awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status" 2>/dev/null)" || kb=0
    sum=$((sum + ${kb:-0}))
  done
  echo "$sum"
}
