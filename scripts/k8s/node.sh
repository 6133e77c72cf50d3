# node.sh - one real node for cluster.sh's control plane (sourced by cluster.sh for
# `up --real-node DIR`): containerd (Debian's 1.6, CRI, runc, cgroupfs), the CNI bridge
# and portmap plugins, kubelet and kube-proxy (iptables), CoreDNS as a host process
# answering Service names on the pods' gateway address, and kube-router's network policy
# controller alone (no routing, no service proxy), which enforces NetworkPolicies. Everything lives under DIR/node
# and is stopped by `down`; nothing is installed on the host but sysctls and iptables rules.
#
# What this machine needs, found by trying (issue 31): cgroup v1 in hybrid mode with no
# systemd, so cgroupfs and `failCgroupV1: false`; root without CAP_SYS_RESOURCE, so
# containerd's `restrict_oom_score_adj` and kubelet's `oomScoreAdj: 0`; no registry, so
# the pause image is built here and images are imported from podman.

NODE_NAME=kubedav-node
POD_SUBNET=10.244.0.0/24
POD_GATEWAY=10.244.0.1
PAUSE_IMAGE=localhost/kubedav-pause:1
NODE_COMPONENTS=(containerd kubelet kube-proxy coredns kube-router)

# The address the node registers with: the host's source address towards the outside.
node_ip() {
	ip -4 route get 1.1.1.1 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p' | head -1
}

write_containerd_config() { # dir
	local n=$1/node
	mkdir -p "$n/cni/conf" "$n/containerd/root" "$n/containerd/state"
	cat >"$n/containerd/config.toml" <<EOF
version = 2
root = "$n/containerd/root"
state = "$n/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs"]
[grpc]
  address = "$n/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # The pod sandbox's oom_score_adj of -998 needs CAP_SYS_RESOURCE, which root here lacks.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "$NODE_ROOT/usr/sbin/runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$NODE_ROOT/usr/lib/cni"
    conf_dir = "$n/cni/conf"
EOF
	cat >"$n/cni/conf/10-kubedav.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "kubedav",
  "plugins": [
    {"type": "bridge", "bridge": "kubedav0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "$POD_SUBNET", "gateway": "$POD_GATEWAY"}]],
              "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}},
    {"type": "loopback"}
  ]
}
EOF
}

write_kubelet_config() { # dir node-ip
	local n=$1/node
	mkdir -p "$n/kubelet"
	echo "nameserver $POD_GATEWAY" >"$n/resolv.conf"
	echo "search default.svc.cluster.local svc.cluster.local cluster.local" >>"$n/resolv.conf"
	cat >"$n/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: unix://$n/containerd.sock
cgroupDriver: cgroupfs
# cgroup v1 here: kubelet 1.35 refuses it unless told.
failCgroupV1: false
# Pods' QoS cgroups and node allocatable enforcement need controllers this machine's
# hybrid hierarchy does not delegate; the pods' own limits still apply.
cgroupsPerQOS: false
enforceNodeAllocatable: []
# Setting its own oom_score_adj needs CAP_SYS_RESOURCE.
oomScoreAdj: 0
failSwapOn: false
clusterDomain: cluster.local
clusterDNS: [$POD_GATEWAY]
resolvConf: $n/resolv.conf
address: $2
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $KUBELET_HEALTHZ_PORT
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $1/pki/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: $1/pki/kubelet.crt
tlsPrivateKeyFile: $1/pki/kubelet.key
rootDir: $n/kubelet/root
# The disk of a test machine is shared with everything else: evict only when it is full.
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
EOF
}

write_kube_proxy_config() { # dir
	local n=$1/node
	cat >"$n/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $1/pki/kube-proxy.kubeconfig}
mode: iptables
clusterCIDR: $POD_CIDR
hostnameOverride: $NODE_NAME
bindAddress: 127.0.0.1
healthzBindAddress: 127.0.0.1:$PROXY_HEALTHZ_PORT
metricsBindAddress: 127.0.0.1:$PROXY_METRICS_PORT
# Bridged packets pass iptables (br_netfilter, set by node_up), so Service traffic between
# pods keeps the client pod's address, as NetworkPolicies need; only traffic from outside
# the pod network (the host) is masqueraded.
iptables: {masqueradeAll: false}
conntrack: {maxPerCore: 0}
EOF
}

write_corefile() { # dir
	cat >"$1/node/Corefile" <<EOF
.:53 {
    bind $POD_GATEWAY
    errors
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig $1/pki/coredns.kubeconfig $CLUSTER_NAME
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
    cache 5
}
EOF
}

# A pause image with a static Go binary that waits for SIGTERM (no registry to pull one).
build_pause_image() {
	if podman image exists "$PAUSE_IMAGE" 2>/dev/null; then
		return
	fi
	need_go
	local tmp
	tmp=$(mktemp -d)
	cat >"$tmp/main.go" <<'EOF'
// pause holds a pod's namespaces until it is told to stop, reaping orphans meanwhile.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range signals {
		if s != syscall.SIGCHLD {
			return
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
EOF
	(cd "$tmp" && "$GO" mod init kubedav.local/pause >/dev/null 2>&1 &&
		CGO_ENABLED=0 "$GO" build -trimpath -ldflags "-s -w" -o pause .)
	printf 'FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n' >"$tmp/Containerfile"
	podman build -q -t "$PAUSE_IMAGE" -f "$tmp/Containerfile" "$tmp" >/dev/null
	rm -rf "$tmp"
}

# Moves IMAGE from podman's store into the node's containerd (namespace k8s.io).
import_image() { # dir image
	local tmp
	tmp=$(mktemp -d)
	podman save --format oci-archive -o "$tmp/image.tar" "$2" >/dev/null
	"$NODE_ROOT/usr/bin/ctr" --address "$1/node/containerd.sock" -n k8s.io images import \
		--base-name "${2%:*}" "$tmp/image.tar" >/dev/null
	rm -rf "$tmp"
}

# Certificates and tokens of the node's components, beside the control plane's.
node_pki() { # dir
	local p=$1/pki ip
	ip=$(node_ip)
	new_cert "$p" kubelet "system:node:$NODE_NAME" ca serverAuth "IP:127.0.0.1,IP:$ip,DNS:$NODE_NAME"
	new_cert "$p" apiserver-kubelet-client kube-apiserver-kubelet-client ca clientAuth
	local user
	for user in "system:node:$NODE_NAME" system:kube-proxy coredns kube-router; do
		grep -q ",$user," "$p/tokens.csv" && continue
		case $user in
		system:node:*) printf '%s,%s,%s,"system:nodes"\n' "$(openssl rand -hex 24)" "$user" "$user" ;;
		*) printf '%s,%s,%s\n' "$(openssl rand -hex 24)" "$user" "$user" ;;
		esac >>"$p/tokens.csv"
	done
	write_kubeconfig "$1" "$p/kubelet.kubeconfig" "system:node:$NODE_NAME"
	write_kubeconfig "$1" "$p/kube-proxy.kubeconfig" system:kube-proxy
	write_kubeconfig "$1" "$p/coredns.kubeconfig" coredns
	write_kubeconfig "$1" "$p/kube-router.kubeconfig" kube-router
}

# The kube-apiserver flags a real node needs: the Node authorizer for kubelet; a client
# certificate to reach kubelet (logs, exec) instead of the egress selector that keeps a
# kwok-only control plane off the cluster network; and an address pods reach it at,
# which the `kubernetes` Service's endpoints name (pods such as the chart's secrets hook
# call the API through it).
node_apiserver_flags() { # dir
	local p=$1/pki
	printf '%s\n' --authorization-mode=Node,RBAC \
		--bind-address=0.0.0.0 --advertise-address="$(node_ip)" --endpoint-reconciler-type=lease \
		--kubelet-client-certificate="$p/apiserver-kubelet-client.crt" \
		--kubelet-client-key="$p/apiserver-kubelet-client.key" \
		--kubelet-certificate-authority="$p/ca.crt"
}

# RBAC for the node's components, as kubeadm grants it.
node_rbac() {
	"${kc[@]}" apply -f - >/dev/null <<'EOF'
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "kubedav:node-proxier"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:node-proxier"}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: "system:kube-proxy"}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "kubedav:apiserver-kubelet"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:kubelet-api-admin"}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: kube-apiserver-kubelet-client}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "kubedav:coredns"}
rules:
- {apiGroups: [""], resources: [endpoints, services, pods, namespaces], verbs: [list, watch]}
- {apiGroups: [discovery.k8s.io], resources: [endpointslices], verbs: [list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "kubedav:coredns"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "kubedav:coredns"}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: coredns}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "kubedav:kube-router"}
rules:
- {apiGroups: [""], resources: [namespaces, pods, services, nodes, endpoints], verbs: [get, list, watch]}
- {apiGroups: [networking.k8s.io], resources: [networkpolicies], verbs: [list, watch]}
- {apiGroups: [discovery.k8s.io], resources: [endpointslices], verbs: [get, list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "kubedav:kube-router"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "kubedav:kube-router"}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: kube-router}]
EOF
}

# Starts containerd, kubelet, kube-proxy and CoreDNS; imports the pause image and, when
# podman has them, KUBEDAV_NODE_IMAGES (default: localhost/kubedav:test).
node_up() { # dir
	local dir=$1 n=$1/node ip b
	ip=$(node_ip)
	[[ -n $ip ]] || die "no route to find the node's address by"
	for b in kubelet kube-proxy coredns kube-router; do
		[[ -x $BIN/$b ]] || die "$BIN/$b missing; run: $0 build --real-node"
	done
	[[ -x $NODE_ROOT/usr/bin/containerd ]] || die "containerd missing; run: $0 build --real-node"
	sysctl -qw net.ipv4.ip_forward=1
	modprobe br_netfilter 2>/dev/null || true
	[[ -e /proc/sys/net/bridge/bridge-nf-call-iptables ]] ||
		die "br_netfilter is missing: bridged pod traffic would bypass kube-proxy's and kube-router's rules"
	sysctl -qw net.bridge.bridge-nf-call-iptables=1
	node_pki "$dir"
	node_rbac
	write_containerd_config "$dir"
	write_kubelet_config "$dir" "$ip"
	write_kube_proxy_config "$dir"
	write_corefile "$dir"
	# The bridge exists before the first pod, so CoreDNS can listen on its address.
	if ! ip link show kubedav0 >/dev/null 2>&1; then
		ip link add kubedav0 type bridge
		ip addr add "$POD_GATEWAY/24" dev kubedav0
	fi
	ip link set kubedav0 up

	start_proc "$dir" containerd env PATH="$NODE_ROOT/usr/bin:$NODE_ROOT/usr/sbin:$PATH" \
		"$NODE_ROOT/usr/bin/containerd" --config "$n/containerd/config.toml"
	local t0=$SECONDS
	until [[ -S $n/containerd.sock ]] && ctr_node "$dir" version >/dev/null 2>&1; do
		((SECONDS - t0 < 60)) || fail_up "$dir" containerd
		sleep 0.2
	done
	build_pause_image
	local image
	for image in "$PAUSE_IMAGE" ${KUBEDAV_NODE_IMAGES:-localhost/kubedav:test}; do
		if podman image exists "$image" 2>/dev/null; then
			import_image "$dir" "$image"
			log "imported $image into the node's containerd"
		fi
	done

	start_proc "$dir" kubelet "$BIN/kubelet" --config="$n/kubelet/config.yaml" \
		--kubeconfig="$dir/pki/kubelet.kubeconfig" --hostname-override="$NODE_NAME" --node-ip="$ip" --v=1
	start_proc "$dir" kube-proxy env PATH="$NODE_ROOT/usr/sbin:$PATH" "$BIN/kube-proxy" --config="$n/kube-proxy.yaml"
	start_proc "$dir" coredns "$BIN/coredns" -conf "$n/Corefile"
	start_proc "$dir" kube-router env PATH="$NODE_ROOT/usr/sbin:$PATH" \
		LD_LIBRARY_PATH="$NODE_ROOT/usr/lib/$(uname -m)-linux-gnu" "$BIN/kube-router" \
		--run-firewall --run-router=false --run-service-proxy=false --enable-cni=false \
		--kubeconfig "$dir/pki/kube-router.kubeconfig" --hostname-override "$NODE_NAME" --health-port 0
	t0=$SECONDS
	until "${kc[@]}" get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null | grep -q True; do
		((SECONDS - t0 < 120)) || fail_up "$dir" kubelet
		pid_of "$dir" kubelet >/dev/null || fail_up "$dir" kubelet
		sleep 1
	done
	log "node $NODE_NAME Ready at $ip ($("$NODE_ROOT/usr/bin/containerd" --version | awk '{print $1, $3}'))"
}

ctr_node() { # dir args...
	local dir=$1
	shift
	"$NODE_ROOT/usr/bin/ctr" --address "$dir/node/containerd.sock" "$@"
}

# Removes kube-router's policy chains and ipsets (its --cleanup-config in v2.1.0 leaves
# them, then fails in the service proxy's cleanup).
remove_policy_rules() {
	local rules set
	rules=$(iptables-save -t filter 2>/dev/null) || return 0
	if grep -qE 'KUBE-ROUTER|KUBE-POD-FW-|KUBE-NWPLCY-' <<<"$rules"; then
		grep -vE 'KUBE-ROUTER|KUBE-POD-FW-|KUBE-NWPLCY-' <<<"$rules" | iptables-restore -T filter
	fi
	for set in $(LD_LIBRARY_PATH="$NODE_ROOT/usr/lib/$(uname -m)-linux-gnu" "$NODE_ROOT/usr/sbin/ipset" list -n 2>/dev/null |
		grep -E '^(KUBE-SRC-|KUBE-DST-|kube-router-)' || true); do
		LD_LIBRARY_PATH="$NODE_ROOT/usr/lib/$(uname -m)-linux-gnu" "$NODE_ROOT/usr/sbin/ipset" destroy "$set" 2>/dev/null || true
	done
}

# Stops the pods' containers (containerd leaves them running when it stops), the node's
# processes, its mounts, kube-proxy's rules and the bridge.
node_down() { # dir
	local dir=$1 pid name task m
	stop_one "$dir" kubelet
	if pid_of "$dir" containerd >/dev/null; then
		for task in $(ctr_node "$dir" -n k8s.io tasks ls -q 2>/dev/null); do
			ctr_node "$dir" -n k8s.io tasks kill -s SIGKILL "$task" >/dev/null 2>&1 || true
		done
	fi
	for name in kube-router coredns kube-proxy containerd; do
		stop_one "$dir" "$name"
	done
	# Shims outlive containerd; theirs name this node's socket.
	for pid in $(pgrep -f "containerd-shim-runc-v2.*$dir/node/" || true); do
		kill -KILL "$pid" 2>/dev/null || true
	done
	local mounts
	mounts=$(grep -o " $dir/node/[^ ]*" /proc/mounts | sort -r || true)
	for m in $mounts; do umount -l "$m" 2>/dev/null || true; done
	if [[ -x $BIN/kube-proxy ]]; then "$BIN/kube-proxy" --cleanup >/dev/null 2>&1 || true; fi
	remove_policy_rules
	ip link del kubedav0 2>/dev/null || true
}
