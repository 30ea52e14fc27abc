#!/usr/bin/env bash
# emucluster.sh: an emulated cluster in one Linux box, and Open MPI across it.
#
# Hosts are network namespaces, switches are Linux bridges, links are veth pairs; a longer
# switch-to-switch link is a chain of extra bridges (each bridge+veth hop adds about 1.5 us RTT),
# and switch-to-switch links can be shaped with `tc tbf` to make an oversubscribed tree (see
# docs/design.md §5.3). All hosts share one flat IPv4 subnet; the root namespace gets an address on
# it (for mpirun's out-of-band traffic).
#
#   emucluster.sh [--prefix P] up TOPOLOGY [--extra-hops K] [--uplink-rate RATE] [--host-rate RATE]
#                                          [--subnet A.B.C.D/LEN] [--force]
#   emucluster.sh [--prefix P] down
#   emucluster.sh [--prefix P] status
#   emucluster.sh [--prefix P] hosts                  # host names, one a line, block order
#   emucluster.sh [--prefix P] truth                  # the emulated topology (as given to up)
#   emucluster.sh [--prefix P] mpirun [--placement block|round-robin] [--ranks-per-host N] [--] ARGS...
#
# TOPOLOGY is a Slurm topology.conf (`SwitchName=s0 Nodes=h[1-3]`, `SwitchName=top Switches=s[0-2]`)
# or topology JSON -- whatever `treecast topology convert` reads, which parses and validates it --
# or the shorthand `SxH` (e.g. `3x3`): S leaf switches s0.. with H hosts each (h000, h001, ...)
# below a top switch `core`. Host names must be valid host names (letters, digits, '.', '-').
# The treecast binary is $TREECAST_BIN, else target/release/treecast, else target/debug/treecast.
#
# Layout. Every bridge and the switch side of every veth live in one "fabric" namespace
# `P-fabric`, so the emulated network never touches the root namespace's interfaces, bridge
# netfilter hooks or routes (bridge-nf-call-iptables is turned off inside it); switch S is the
# bridge `br-S` there. Host H is the namespace `P-H` with `eth0`; the root namespace has one veth
# `P-net` into the first (top) switch. Every switch-to-switch link runs through K extra bridges (K+1 veth pairs); with
# --uplink-rate its first veth pair is shaped by tbf at both ends, i.e. in both directions.
# --host-rate shapes each host's access link the same way.
#
# State. `up` records every object before creating it in STATE/P/created (STATE is /run/emucluster,
# or /tmp/emucluster when /run is not writable); `down` deletes exactly those objects (after
# killing the processes still running inside its namespaces), also after a failed or interrupted
# `up`, and `up` itself tears down on failure or Ctrl-C. `up` refuses when the prefix is in use
# (state exists: `--force` tears that cluster down first) or when objects named with the prefix
# exist that no state records. Several clusters with different prefixes and subnets coexist.
#
# Open MPI (`mpirun`): writes a hostfile and an rsh agent (`ip netns exec P-H unshare --uts sh -c
# "hostname H; CMD"`, so MPI_Get_processor_name gives H) and runs
#   mpirun --allow-run-as-root --oversubscribe --hostfile F --map-by slot|node -np HOSTS*N
#          --mca plm_rsh_agent AGENT --mca plm_rsh_no_tree_spawn 1 --mca btl tcp,self
#          --mca btl_tcp_if_include SUBNET --mca oob_tcp_if_include SUBNET ARGS...
# Placement: `block` puts ranks r*N .. r*N+N-1 on the r-th host in switch order (consecutive ranks
# share a host, then a switch); `round-robin` deals ranks to hosts interleaved across the leaf
# switches (rank 0 on switch 0, rank 1 on switch 1, ...). `-np` in ARGS overrides the rank count.
# $EMUCLUSTER_BTL overrides the btl list (e.g. `tcp,self,vader` for shared memory inside a host).
#
# MPICH (`mpirun` on the PATH is Hydra, as after `TREECAST_MPI=mpich . scripts/env.sh`): the
# same hostfile as HOST:SLOTS lines and the same agent, and
#   mpirun -f F -launcher rsh -launcher-exec AGENT -localhost ROOT_IP -n HOSTS*N
#          -genv UCX_TLS tcp,self -genv UCX_NET_DEVICES eth0 ARGS...
# ($EMUCLUSTER_UCX_TLS overrides the transports). `-n` in ARGS overrides the rank count.
#
# Exit codes: 0 success; 1 failure (including: not root, kernel or tool missing); 2 bad usage.
set -euo pipefail

PROG=emucluster
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

die() { echo "$PROG: $*" >&2; exit 1; }
usage_die() { echo "$PROG: $*" >&2; echo "usage: $0 [--prefix P] up|down|status|hosts|truth|mpirun ... (see the comment at the top of $0)" >&2; exit 2; }

PREFIX="${EMUCLUSTER_PREFIX:-tcemu}"

# ---------------------------------------------------------------- helpers

ip2int() {
  local IFS=.
  # shellcheck disable=SC2206
  local p=($1)
  echo $(( (p[0] << 24) | (p[1] << 16) | (p[2] << 8) | p[3] ))
}
int2ip() { echo "$(( ($1 >> 24) & 255 )).$(( ($1 >> 16) & 255 )).$(( ($1 >> 8) & 255 )).$(( $1 & 255 ))"; }

# A rate as tc writes it (integer + bit|kbit|mbit|gbit, SI units) -> bytes per second.
rate_bytes() {
  local r="${1,,}" n unit
  [[ "$r" =~ ^([0-9]+)(bit|kbit|mbit|gbit)$ ]] || return 1
  n=${BASH_REMATCH[1]}; unit=${BASH_REMATCH[2]}
  case $unit in
    bit) echo $(( n / 8 ));;
    kbit) echo $(( n * 1000 / 8 ));;
    mbit) echo $(( n * 1000000 / 8 ));;
    gbit) echo $(( n * 1000000000 / 8 ));;
  esac
}

state_root() {
  if [ -n "${EMUCLUSTER_STATE:-}" ]; then echo "$EMUCLUSTER_STATE"
  elif mkdir -p /run/emucluster 2>/dev/null && [ -w /run/emucluster ]; then echo /run/emucluster
  else mkdir -p /tmp/emucluster; echo /tmp/emucluster
  fi
}

need_root() {
  [ "$(id -u)" = 0 ] || die "must run as root (network namespaces, bridges and tc need CAP_NET_ADMIN); try sudo"
}

need_tools() {
  local t
  for t in "$@"; do
    command -v "$t" >/dev/null 2>&1 || die "missing tool '$t' (Debian: apt-get install iproute2 util-linux openmpi-bin)"
  done
}

# Create and delete a namespace with a bridge, a veth pair and a tbf qdisc: one line naming what
# this kernel lacks, before anything is built. The namespace is recorded first (when a state
# directory exists), so an interrupted probe leaves nothing behind either.
probe_kernel() {
  local ns="$PREFIX-probe" what="" out=""
  [ ! -f "$STATE_DIR/created" ] || record netns "$ns"
  if ! out=$(ip netns add "$ns" 2>&1); then what="network namespaces (ip netns add: $out)"
  elif ! out=$(ip -n "$ns" link add pbr type bridge 2>&1); then what="Linux bridges (ip link add type bridge: $out)"
  elif ! out=$(ip -n "$ns" link add pva type veth peer name pvb 2>&1); then what="veth pairs (ip link add type veth: $out)"
  elif ! out=$(ip -n "$ns" link set pva master pbr 2>&1); then what="bridge ports (ip link set master: $out)"
  elif ! out=$(tc -n "$ns" qdisc add dev pva root tbf rate 100mbit burst 16kb latency 10ms 2>&1); then
    what="the tbf qdisc (tc qdisc add tbf: $out)"
  elif ! out=$(ip netns exec "$ns" unshare --uts true 2>&1); then what="UTS namespaces (unshare --uts: $out)"
  fi
  ip netns del "$ns" 2>/dev/null || true
  # The probe namespace is gone: drop its record, or `status` would call the cluster damaged.
  if [ -f "$STATE_DIR/created" ] && ! ip netns list | awk '{print $1}' | grep -qx "$ns"; then
    grep -vx "netns $ns" "$STATE_DIR/created" >"$STATE_DIR/created.tmp" || true
    mv "$STATE_DIR/created.tmp" "$STATE_DIR/created"
  fi
  if [ -n "$what" ]; then
    # Nothing but the probe was made: remove the state quietly so the refusal stays one line.
    [ ! -d "$STATE_DIR" ] || { teardown; UP_DONE=1; }
    die "kernel lacks $(echo "$what" | tr '\n' ' ')"
  fi
}

find_treecast() {
  local c
  for c in "${TREECAST_BIN:-}" "$REPO/target/release/treecast" "$REPO/target/debug/treecast"; do
    if [ -n "$c" ] && [ -x "$c" ]; then echo "$c"; return; fi
  done
  command -v treecast 2>/dev/null || die "treecast binary not found (build it: cargo build --release, or set TREECAST_BIN)"
}

# ---------------------------------------------------------------- topology

SW_NAMES=()        # switch names, topology order (the first is the attachment point of the root ns)
HOSTS=()           # host names, block order (grouped by leaf switch)
HOST_SW=()         # index into SW_NAMES of each host's switch
SS_LINKS=()        # "a b" switch index pairs

# Parse TOPOLOGY into the arrays above. Uses `treecast topology convert --format json`, whose
# writer puts one vertex or link per line.
load_topology() {
  local spec="$1" file json
  if [[ "$spec" =~ ^([0-9]+)x([0-9]+)$ ]] && [ ! -e "$spec" ]; then
    local s=${BASH_REMATCH[1]} h=${BASH_REMATCH[2]} i j
    [ "$s" -ge 1 ] && [ "$h" -ge 1 ] || usage_die "topology shorthand $spec: need at least 1x1"
    file=$(mktemp "${TMPDIR:-/tmp}/emucluster-$PREFIX.XXXXXX")
    {
      echo "# generated by $PROG from the shorthand $spec"
      for ((i = 0; i < s; i++)); do
        printf 'SwitchName=s%d Nodes=' "$i"
        for ((j = 0; j < h; j++)); do printf '%sh%03d' "$([ $j = 0 ] || echo ,)" $((i * h + j)); done
        echo
      done
      echo "SwitchName=core Switches=s[0-$((s - 1))]"
    } >"$file"
  else
    [ -f "$spec" ] || usage_die "topology '$spec' is neither a file nor a shorthand like 3x3"
    file="$spec"
  fi
  local tc_bin
  tc_bin=$(find_treecast)
  local err rc=0
  err=$(mktemp "${TMPDIR:-/tmp}/emucluster-$PREFIX.XXXXXX")
  json=$("$tc_bin" topology convert "$file" --format json 2>"$err") || rc=$?
  TOPO_TEXT=$(cat "$file")
  [ "$file" = "$spec" ] || rm -f "$file"
  if [ "$rc" != 0 ]; then
    local msg
    msg=$(head -1 "$err"); rm -f "$err"
    die "topology $spec: ${msg#treecast: }"
  fi
  rm -f "$err"

  local -A kind=() sw_index=() host_sw_name=() first_seen=()
  local -a nodes=() order=()
  local line id k a b
  while IFS= read -r line; do
    if [[ "$line" == *'\'* ]]; then die "topology $spec: names with escapes are not supported: $line"; fi
    if [[ "$line" =~ \"id\":\ \"([^\"]*)\",\ \"kind\":\ \"([a-z]+)\" ]]; then
      id=${BASH_REMATCH[1]}; k=${BASH_REMATCH[2]}
      kind[$id]=$k
      case $k in
        switch) sw_index[$id]=${#SW_NAMES[@]}; SW_NAMES+=("$id");;
        node)
          [[ "$id" =~ ^[A-Za-z0-9][A-Za-z0-9.-]{0,62}$ ]] || die "topology $spec: host name '$id' is not a valid host name (letters, digits, '.', '-')"
          nodes+=("$id");;
      esac
    elif [[ "$line" =~ \"a\":\ \"([^\"]*)\",\ \"b\":\ \"([^\"]*)\" ]]; then
      a=${BASH_REMATCH[1]}; b=${BASH_REMATCH[2]}
      if [ "${kind[$a]}" = switch ] && [ "${kind[$b]}" = switch ]; then
        SS_LINKS+=("${sw_index[$a]} ${sw_index[$b]}")
      elif [ "${kind[$a]}" = node ] || [ "${kind[$b]}" = node ]; then
        local host=$a other=$b
        [ "${kind[$a]}" = node ] || { host=$b; other=$a; }
        # A rank below its node is not part of the network.
        [ "${kind[$other]}" = rank ] && continue
        [ "${kind[$other]}" = switch ] || die "topology $spec: host $host is linked to $other, which is not a switch"
        [ -z "${host_sw_name[$host]:-}" ] || die "topology $spec: host $host hangs below two switches"
        host_sw_name[$host]=$other
        if [ -z "${first_seen[$other]:-}" ]; then first_seen[$other]=1; order+=("$other"); fi
      fi
    fi
  done <<<"$json"
  [ ${#nodes[@]} -gt 0 ] || die "topology $spec: no hosts (node vertices)"
  local n s
  for n in "${nodes[@]}"; do
    [ -n "${host_sw_name[$n]:-}" ] || die "topology $spec: host $n is not below a switch"
  done
  # Block order: hosts grouped by leaf switch (switches in order of first use), file order inside.
  for s in "${order[@]}"; do
    for n in "${nodes[@]}"; do
      if [ "${host_sw_name[$n]}" = "$s" ]; then HOSTS+=("$n"); HOST_SW+=("${sw_index[$s]}"); fi
    done
  done
}

# ---------------------------------------------------------------- state

STATE_DIR=""
set_state_dir() {
  [[ "$PREFIX" =~ ^[a-z][a-z0-9]{0,9}$ ]] || usage_die "--prefix: 1-10 lower-case letters/digits starting with a letter, got '$PREFIX'"
  STATE_DIR="$(state_root)/$PREFIX"
}

# Objects named with the prefix that exist now (netns and root-namespace links).
existing_objects() {
  ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${PREFIX}-" | sed 's/^/netns /' || true
  ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -E "^${PREFIX}-" | sed 's/^/link /' || true
}

record() { echo "$1 $2" >>"$STATE_DIR/created"; }

kill_in_netns() {
  local ns="$1" pids
  pids=$(ip netns pids "$ns" 2>/dev/null || true)
  [ -n "$pids" ] || return 0
  # shellcheck disable=SC2086
  kill -TERM $pids 2>/dev/null || true
  local i
  for ((i = 0; i < 20; i++)); do
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    [ -n "$pids" ] || return 0
    sleep 0.1
  done
  # shellcheck disable=SC2086
  kill -KILL $pids 2>/dev/null || true
}

# Delete exactly what STATE_DIR/created lists (newest first), then the state directory.
teardown() {
  trap '' INT TERM
  local f="$STATE_DIR/created" kind name left=0
  if [ -f "$f" ]; then
    while read -r kind name; do
      [ "$kind" = netns ] && kill_in_netns "$name"
    done <"$f"
    while read -r kind name; do
      case $kind in
        netns)
          if ip netns list | awk '{print $1}' | grep -qx "$name"; then
            ip netns del "$name" || left=1
          fi;;
        link)
          if ip link show "$name" >/dev/null 2>&1; then ip link del "$name" || left=1; fi;;
      esac
    done < <(tac "$f")
  fi
  if [ "$left" = 0 ]; then
    rm -rf "$STATE_DIR"
  else
    echo "$PROG: some objects of cluster $PREFIX could not be deleted; state kept in $STATE_DIR" >&2
    return 1
  fi
}

# ---------------------------------------------------------------- up

cmd_up() {
  local topo="" hops=0 uplink_rate="" host_rate="" subnet="" force=0
  while [ $# -gt 0 ]; do
    case "$1" in
      --extra-hops) hops="${2:?--extra-hops needs a number}"; shift 2;;
      --uplink-rate) uplink_rate="${2:?--uplink-rate needs a rate}"; shift 2;;
      --host-rate) host_rate="${2:?--host-rate needs a rate}"; shift 2;;
      --subnet) subnet="${2:?--subnet needs A.B.C.D/LEN}"; shift 2;;
      --prefix) PREFIX="${2:?}"; shift 2;;
      --force) force=1; shift;;
      -*) usage_die "up: unknown option $1";;
      *) [ -z "$topo" ] || usage_die "up: more than one topology ($topo, $1)"; topo="$1"; shift;;
    esac
  done
  [ -n "$topo" ] || usage_die "up: name a topology file or a shorthand like 3x3"
  [[ "$hops" =~ ^[0-9]+$ ]] && [ "$hops" -le 64 ] || usage_die "--extra-hops: expected 0..64, got '$hops'"
  local uplink_bps="" host_bps=""
  if [ -n "$uplink_rate" ]; then uplink_bps=$(rate_bytes "$uplink_rate") || usage_die "--uplink-rate: expected e.g. 300mbit, got '$uplink_rate'"; fi
  if [ -n "$host_rate" ]; then host_bps=$(rate_bytes "$host_rate") || usage_die "--host-rate: expected e.g. 1gbit, got '$host_rate'"; fi
  [ -z "$uplink_bps" ] || [ "$uplink_bps" -ge 1000 ] || usage_die "--uplink-rate $uplink_rate is too slow"
  [ -z "$host_bps" ] || [ "$host_bps" -ge 1000 ] || usage_die "--host-rate $host_rate is too slow"

  # Default subnet per prefix, so clusters with different prefixes do not clash.
  if [ -z "$subnet" ]; then subnet="10.213.$(( $(printf '%s' "$PREFIX" | cksum | cut -d' ' -f1) % 256 )).0/24"; fi
  [[ "$subnet" =~ ^([0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3})/([0-9]{1,2})$ ]] || usage_die "--subnet: expected A.B.C.D/LEN, got '$subnet'"
  local net_ip=${BASH_REMATCH[1]} plen=${BASH_REMATCH[2]}
  [ "$plen" -ge 8 ] && [ "$plen" -le 29 ] || usage_die "--subnet: prefix length must be 8..29, got $plen"
  local mask=$(( (0xffffffff << (32 - plen)) & 0xffffffff ))
  local net=$(( $(ip2int "$net_ip") & mask )) size=$(( 1 << (32 - plen) ))
  subnet="$(int2ip $net)/$plen"

  need_root
  need_tools ip tc unshare awk tac cksum
  set_state_dir
  load_topology "$topo"
  local nh=${#HOSTS[@]} ns=${#SW_NAMES[@]}
  [ $(( nh + 3 )) -le "$size" ] || die "subnet $subnet has room for $(( size - 3 )) hosts, the topology has $nh"
  if [ -d "$STATE_DIR" ]; then
    if [ "$force" = 1 ]; then
      echo "$PROG: --force: tearing down the existing cluster $PREFIX" >&2
      teardown || die "could not tear down the existing cluster $PREFIX"
    else
      die "a cluster with prefix $PREFIX exists (state $STATE_DIR); run '$0 --prefix $PREFIX down' or pass --force"
    fi
  fi
  local stray
  stray=$(existing_objects)
  [ -z "$stray" ] || die "objects named with prefix $PREFIX exist but no state records them: $(echo "$stray" | tr '\n' ' ')- delete them or use another --prefix"
  # The subnet must not overlap any route of the root namespace (another cluster, a real network).
  local r dst rlen rnet m
  while read -r r _; do
    [ "$r" = default ] && continue
    dst=${r%/*}; rlen=32; [[ "$r" == */* ]] && rlen=${r#*/}
    m=$(( plen < rlen ? plen : rlen ))
    m=$(( (0xffffffff << (32 - m)) & 0xffffffff ))
    rnet=$(ip2int "$dst")
    [ $(( rnet & m )) != $(( net & m )) ] || die "subnet $subnet overlaps the existing route $r; pass another --subnet"
  done < <(ip -4 route show table all type unicast 2>/dev/null | grep -v '^local\|^broadcast' || true)

  mkdir -p "$(dirname "$STATE_DIR")"
  mkdir "$STATE_DIR" 2>/dev/null || die "another '$PROG up' for prefix $PREFIX is running (state $STATE_DIR appeared)"
  : >"$STATE_DIR/created"
  UP_DONE=0
  trap 'rc=$?; if [ "$UP_DONE" = 0 ]; then echo "$PROG: up failed or interrupted; tearing down what it created" >&2; teardown || true; fi; exit $rc' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  probe_kernel
  printf '%s\n' "$TOPO_TEXT" >"$STATE_DIR/topology"

  local fab="$PREFIX-fabric" i
  # Fabric namespace: all bridges and the switch ends of all veths.
  record netns "$fab"
  ip netns add "$fab"
  ip -n "$fab" link set lo up
  ip netns exec "$fab" sh -c 'for f in /proc/sys/net/bridge/bridge-nf-call-iptables /proc/sys/net/bridge/bridge-nf-call-ip6tables /proc/sys/net/bridge/bridge-nf-call-arptables; do [ -w $f ] && echo 0 >$f; done; echo 1 >/proc/sys/net/ipv6/conf/default/disable_ipv6; echo 1 >/proc/sys/net/ipv6/conf/all/disable_ipv6' 2>/dev/null || true
  # Bridge of switch i: br-<name> when the name fits an interface name, else br<i>.
  local -a br=()
  for ((i = 0; i < ns; i++)); do
    if [[ "${SW_NAMES[$i]}" =~ ^[A-Za-z0-9_.-]{1,12}$ ]]; then br[i]="br-${SW_NAMES[$i]}"; else br[i]="br$i"; fi
    ip -n "$fab" link add "${br[$i]}" type bridge stp_state 0 forward_delay 0
    ip -n "$fab" link set "${br[$i]}" up
  done

  # tbf on one device; burst = 2 ms of data (at least 16 KiB) so GSO packets pass whole and the
  # rate holds over a few ms; queue up to 50 ms of data so TCP is not driven into timeouts.
  shape() { # netns dev bytes_per_s rate
    local burst=$(( $3 / 500 )); [ "$burst" -ge 16384 ] || burst=16384
    tc -n "$1" qdisc add dev "$2" root tbf rate "$4" burst "$burst" latency 50ms
  }

  # Switch-to-switch links: br_a -v0- x1 -v1- ... xK -vK- br_b.
  local l a b j prev next
  for ((l = 0; l < ${#SS_LINKS[@]}; l++)); do
    read -r a b <<<"${SS_LINKS[$l]}"
    prev="${br[$a]}"
    for ((j = 0; j <= hops; j++)); do
      if [ "$j" -lt "$hops" ]; then
        next="l${l}x$((j + 1))"
        ip -n "$fab" link add "$next" type bridge stp_state 0 forward_delay 0
        ip -n "$fab" link set "$next" up
      else
        next="${br[$b]}"
      fi
      ip -n "$fab" link add "l${l}v${j}a" type veth peer name "l${l}v${j}b"
      ip -n "$fab" link set "l${l}v${j}a" master "$prev" up
      ip -n "$fab" link set "l${l}v${j}b" master "$next" up
      prev="$next"
    done
    if [ -n "$uplink_bps" ]; then
      shape "$fab" "l${l}v0a" "$uplink_bps" "$uplink_rate"
      shape "$fab" "l${l}v0b" "$uplink_bps" "$uplink_rate"
    fi
  done

  # Hosts.
  local h hns hip
  : >"$STATE_DIR/hosts"
  for ((i = 0; i < nh; i++)); do
    h=${HOSTS[$i]}; hns="$PREFIX-$h"; hip=$(int2ip $(( net + 1 + i )))
    record netns "$hns"
    ip netns add "$hns"
    ip netns exec "$hns" sh -c 'echo 1 >/proc/sys/net/ipv6/conf/default/disable_ipv6; echo 1 >/proc/sys/net/ipv6/conf/all/disable_ipv6' 2>/dev/null || true
    ip -n "$fab" link add "h$i" type veth peer name eth0 netns "$hns"
    ip -n "$fab" link set "h$i" master "${br[${HOST_SW[$i]}]}" up
    ip -n "$hns" link set lo up
    ip -n "$hns" addr add "$hip/$plen" dev eth0
    ip -n "$hns" link set eth0 up
    if [ -n "$host_bps" ]; then
      shape "$fab" "h$i" "$host_bps" "$host_rate"
      shape "$hns" eth0 "$host_bps" "$host_rate"
    fi
    echo "$h $hip ${SW_NAMES[${HOST_SW[$i]}]}" >>"$STATE_DIR/hosts"
  done

  # The root namespace's address on the emulated network, at the first (top) switch.
  local root_ip
  root_ip=$(int2ip $(( net + size - 2 )))
  record link "$PREFIX-net"
  ip link add "$PREFIX-net" type veth peer name rootns netns "$fab"
  ip -n "$fab" link set rootns master "${br[0]}" up
  echo 1 >"/proc/sys/net/ipv6/conf/$PREFIX-net/disable_ipv6" 2>/dev/null || true
  ip addr add "$root_ip/$plen" dev "$PREFIX-net"
  ip link set "$PREFIX-net" up

  # The rsh agent: mpirun runs `agent [options] HOST COMMAND...` like ssh.
  cat >"$STATE_DIR/agent" <<EOF
#!/bin/sh
# rsh agent of emulated cluster $PREFIX (written by $PROG up): run COMMAND on emulated HOST,
# i.e. in its network namespace with its own host name.
while [ \$# -gt 0 ]; do case "\$1" in -*) shift;; *) break;; esac; done
host="\$1"; shift
case "\$host" in *[!A-Za-z0-9.-]*|'') echo "$PROG agent: bad host name '\$host'" >&2; exit 1;; esac
exec ip netns exec "$PREFIX-\$host" unshare --uts sh -c "hostname \$host; \$*"
EOF
  chmod +x "$STATE_DIR/agent"
  {
    echo "prefix=$PREFIX"
    echo "subnet=$subnet"
    echo "root_ip=$root_ip"
    echo "topology=$topo"
    echo "switches=${SW_NAMES[*]}"
    echo "bridges=${br[*]} (in namespace $fab)"
    echo "hosts=$nh"
    echo "switch_links=${#SS_LINKS[@]}"
    echo "extra_hops=$hops"
    echo "uplink_rate=${uplink_rate:-unshaped}"
    echo "host_rate=${host_rate:-unshaped}"
  } >"$STATE_DIR/cluster"
  UP_DONE=1
  trap - EXIT INT TERM
  echo "$PROG: cluster $PREFIX up: $ns switches, $nh hosts, ${#SS_LINKS[@]} switch links x $hops extra bridges," \
    "uplinks ${uplink_rate:-unshaped}, host links ${host_rate:-unshaped}; subnet $subnet (root $root_ip)"
}

# ---------------------------------------------------------------- down / status / hosts

cmd_down() {
  while [ $# -gt 0 ]; do
    case "$1" in --prefix) PREFIX="${2:?}"; shift 2;; *) usage_die "down: unknown argument $1";; esac
  done
  need_root
  set_state_dir
  if [ ! -d "$STATE_DIR" ]; then
    echo "$PROG: no cluster with prefix $PREFIX (no state in $STATE_DIR)"
    return 0
  fi
  teardown || exit 1
  echo "$PROG: cluster $PREFIX down"
}

need_cluster() {
  set_state_dir
  [ -f "$STATE_DIR/cluster" ] || die "no cluster with prefix $PREFIX is up (no $STATE_DIR/cluster); run '$0 up ...' first"
}

cmd_status() {
  while [ $# -gt 0 ]; do
    case "$1" in --prefix) PREFIX="${2:?}"; shift 2;; *) usage_die "status: unknown argument $1";; esac
  done
  set_state_dir
  if [ ! -d "$STATE_DIR" ]; then echo "cluster $PREFIX: down"; return 1; fi
  if [ ! -f "$STATE_DIR/cluster" ]; then
    echo "cluster $PREFIX: incomplete (an 'up' is running or was killed); '$0 --prefix $PREFIX down' removes it"
    return 3
  fi
  local missing=0 kind name
  while read -r kind name; do
    case $kind in
      netns) ip netns list | awk '{print $1}' | grep -qx "$name" || { echo "missing netns $name"; missing=1; };;
      link) ip link show "$name" >/dev/null 2>&1 || { echo "missing link $name"; missing=1; };;
    esac
  done <"$STATE_DIR/created"
  echo "cluster $PREFIX: $([ $missing = 0 ] && echo up || echo damaged) (state $STATE_DIR)"
  sed 's/^/  /' "$STATE_DIR/cluster"
  echo "  host ip switch:"
  sed 's/^/    /' "$STATE_DIR/hosts"
  [ $missing = 0 ] || return 3
}

cmd_hosts() {
  while [ $# -gt 0 ]; do
    case "$1" in --prefix) PREFIX="${2:?}"; shift 2;; *) usage_die "hosts: unknown argument $1";; esac
  done
  need_cluster
  awk '{print $1}' "$STATE_DIR/hosts"
}

# The topology the cluster was built from (Slurm topology.conf or JSON, as given to `up`; the
# shorthand SxH as the topology.conf it stands for): what inference should find.
cmd_truth() {
  while [ $# -gt 0 ]; do
    case "$1" in --prefix) PREFIX="${2:?}"; shift 2;; *) usage_die "truth: unknown argument $1";; esac
  done
  need_cluster
  cat "$STATE_DIR/topology"
}

# ---------------------------------------------------------------- mpirun

cmd_mpirun() {
  local placement=block rph=1
  while [ $# -gt 0 ]; do
    case "$1" in
      --placement) placement="${2:?--placement needs block or round-robin}"; shift 2;;
      --ranks-per-host) rph="${2:?--ranks-per-host needs a number}"; shift 2;;
      --prefix) PREFIX="${2:?}"; shift 2;;
      --) shift; break;;
      *) break;;
    esac
  done
  case $placement in block|round-robin) ;; *) usage_die "--placement: expected block or round-robin, got '$placement'";; esac
  [[ "$rph" =~ ^[1-9][0-9]*$ ]] || usage_die "--ranks-per-host: expected a number >= 1, got '$rph'"
  [ $# -gt 0 ] || usage_die "mpirun: name the program to run"
  need_root
  need_tools mpirun
  need_cluster
  local subnet
  subnet=$(sed -n 's/^subnet=//p' "$STATE_DIR/cluster")

  # Hostfile: block = switch order; round-robin = interleaved across leaf switches.
  local hf="$STATE_DIR/hostfile.$placement.$rph.$$" mapby
  if [ "$placement" = block ]; then
    awk -v n="$rph" '{print $1, "slots=" n}' "$STATE_DIR/hosts" >"$hf"
    mapby=slot
  else
    awk -v n="$rph" '{ k = pos[$3]++; key[NR] = k; name[NR] = $1; if (k > max) max = k }
      END { for (k = 0; k <= max; k++) for (i = 1; i <= NR; i++) if (key[i] == k) print name[i], "slots=" n }' \
      "$STATE_DIR/hosts" >"$hf"
    mapby=node
  fi
  local nh np_args=() a
  nh=$(wc -l <"$STATE_DIR/hosts")
  np_args=(-np $(( nh * rph )))
  for a in "$@"; do
    case "$a" in -np|-n|--np|-c|--n) np_args=();; esac
  done
  local rc=0
  if mpirun --version 2>&1 | grep -qi hydra; then
    # MPICH (Hydra): hostfile lines HOST:SLOTS, filled in order and wrapped around, so
    # round-robin lists each host with one slot. Proxies are started through the same agent
    # and call back to this namespace's address. UCX would take the namespaces for one node
    # (same kernel) and move every message through shared memory, past the emulated network:
    # it is restricted to TCP on eth0, as Open MPI is to its tcp BTL. Ranks on the same
    # emulated host still share memory through MPICH's own shared-memory transport.
    local root_ip
    root_ip=$(sed -n 's/^root_ip=//p' "$STATE_DIR/cluster")
    if [ "$placement" = block ]; then
      sed -i "s/ slots=/:/" "$hf"
    else
      sed -i "s/ slots=.*/:1/" "$hf"
    fi
    for a in "$@"; do
      case "$a" in -np|--np) usage_die "mpirun with MPICH: use -n, not $a";; esac
    done
    np_args=("${np_args[@]/#-np/-n}")
    mpirun -f "$hf" -launcher rsh -launcher-exec "$STATE_DIR/agent" -localhost "$root_ip" "${np_args[@]}" \
      -genv UCX_TLS "${EMUCLUSTER_UCX_TLS:-tcp,self}" -genv UCX_NET_DEVICES eth0 \
      "$@" || rc=$?
  else
    mpirun --allow-run-as-root --oversubscribe --hostfile "$hf" --map-by "$mapby" "${np_args[@]}" \
      --mca plm_rsh_agent "$STATE_DIR/agent" --mca plm_rsh_no_tree_spawn 1 \
      --mca btl "${EMUCLUSTER_BTL:-tcp,self}" --mca btl_tcp_if_include "$subnet" --mca oob_tcp_if_include "$subnet" \
      "$@" || rc=$?
  fi
  rm -f "$hf"
  return $rc
}

# ---------------------------------------------------------------- main

while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) PREFIX="${2:?--prefix needs a name}"; shift 2;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0;;
    *) break;;
  esac
done
[ $# -gt 0 ] || usage_die "name a command"
cmd="$1"; shift
case "$cmd" in
  up) cmd_up "$@";;
  down) cmd_down "$@";;
  status) cmd_status "$@";;
  hosts) cmd_hosts "$@";;
  truth) cmd_truth "$@";;
  mpirun) cmd_mpirun "$@";;
  *) usage_die "unknown command '$cmd'";;
esac
