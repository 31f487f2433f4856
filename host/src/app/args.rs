//! Arguments of `wasmop run`; every flag also reads an environment variable.

use std::net::SocketAddr;
use std::path::PathBuf;

/// Arguments of `wasmop run`.
#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// Directory of plugin components (`*.wasm`); each file is one plugin.
    #[arg(long, env = "WASMOP_PLUGINS", default_value = "/plugins")]
    pub plugins: PathBuf,
    /// Namespace whose `WasmPlugin` uploads the host runs (default: the pod's namespace,
    /// else `default`).
    #[arg(long, env = "WASMOP_PLUGIN_NAMESPACE")]
    pub plugin_namespace: Option<String>,
    /// Do not watch `WasmPlugin` uploads; run only the plugins directory.
    #[arg(long, env = "WASMOP_NO_UPLOADS")]
    pub no_uploads: bool,
    /// Seconds between two looks at the plugins directory for changed files.
    #[arg(long, env = "WASMOP_PLUGINS_POLL_SECONDS", default_value_t = 2)]
    pub plugins_poll_seconds: u64,
    /// Kubeconfig file; default: in-cluster configuration inside a pod, else
    /// `$KUBECONFIG` or `~/.kube/config`.
    #[arg(long, env = "WASMOP_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Watch and act in this namespace only (default: all namespaces).
    #[arg(long, env = "WASMOP_NAMESPACE")]
    pub namespace: Option<String>,
    /// Create or update the CRDs the plugins declare before starting.
    #[arg(long, env = "WASMOP_INSTALL_CRDS")]
    pub install_crds: bool,
    /// Address of the HTTP endpoints (/healthz, /readyz, /metrics).
    #[arg(long, env = "WASMOP_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Address the admission webhook server listens on (HTTPS), for plugins that declare
    /// `validate` or `default`; without it their webhooks are not served.
    #[arg(long, env = "WASMOP_WEBHOOK_LISTEN")]
    pub webhook_listen: Option<SocketAddr>,
    /// Base URL the API server calls the webhooks at when the host runs outside the cluster
    /// (`https://127.0.0.1:9443`); default: the Service `--webhook-service`, port 443.
    #[arg(long, env = "WASMOP_WEBHOOK_URL")]
    pub webhook_url: Option<String>,
    /// The Service in front of the host's webhook port, in the host's namespace.
    #[arg(long, env = "WASMOP_WEBHOOK_SERVICE", default_value = "wasmop-webhook")]
    pub webhook_service: String,
    /// The Secret in the host's namespace that keeps the webhooks' CA and serving
    /// certificate (made and renewed by the host).
    #[arg(
        long,
        env = "WASMOP_WEBHOOK_SECRET",
        default_value = "wasmop-webhook-tls"
    )]
    pub webhook_secret: String,
    /// Serve the webhooks with the certificate an admin's issuer (cert-manager) keeps in
    /// this directory (a mounted Secret: `tls.crt`, `tls.key`, `ca.crt`) instead of one the
    /// host makes; read again every minute.
    #[arg(long, env = "WASMOP_WEBHOOK_CERT_DIR")]
    pub webhook_cert_dir: Option<PathBuf>,
    /// Elect a leader with a Lease so that several replicas can run and one acts.
    #[arg(long, env = "WASMOP_LEADER_ELECTION")]
    pub leader_election: bool,
    /// Name of the Lease used for leader election.
    #[arg(long, env = "WASMOP_LEASE_NAME", default_value = "wasmop-leader")]
    pub lease_name: String,
    /// Namespace of the Lease (default: the pod's namespace, else `default`).
    #[arg(long, env = "WASMOP_LEASE_NAMESPACE")]
    pub lease_namespace: Option<String>,
    /// Lease duration in seconds: how long a standby waits for a silent leader.
    #[arg(long, env = "WASMOP_LEASE_SECONDS", default_value_t = 15)]
    pub lease_seconds: u64,
    /// Share the objects among the replicas (needs --leader-election): each replica holds
    /// a shard Lease, the leader assigns every primary object to one shard by consistent
    /// hashing (a label), and each replica watches, caches and reconciles only its own.
    /// With one replica it holds everything.
    #[arg(long, env = "WASMOP_SHARDING", requires = "leader_election")]
    pub sharding: bool,
    /// Name of the ring of shards (the `wasmop.dev/ring` label of the shard Leases, which
    /// live in the leader Lease's namespace): `kubectl get leases -l wasmop.dev/ring=NAME`.
    #[arg(long, env = "WASMOP_RING", default_value = "wasmop")]
    pub ring: String,
    /// Milliseconds between two passes of the sharder (the leader) over the primaries.
    #[arg(long, env = "WASMOP_SHARDER_EVERY_MS", default_value_t = 500)]
    pub sharder_every_ms: u64,
    /// Identity of this replica (default: the pod name, else the hostname and process id).
    #[arg(long, env = "WASMOP_IDENTITY")]
    pub identity: Option<String>,
    /// Name of the host's own pod (downward API); the guard never lets a plan touch it.
    #[arg(long, env = "POD_NAME")]
    pub pod_name: Option<String>,
    /// Namespace of the host's own pod (downward API).
    #[arg(long, env = "POD_NAMESPACE")]
    pub pod_namespace: Option<String>,
    /// Deadline of one plugin call, in milliseconds.
    #[arg(long, env = "WASMOP_CALL_TIMEOUT_MS", default_value_t = 1000)]
    pub call_timeout_ms: u64,
    /// Memory cap of one plugin call, in MiB.
    #[arg(long, env = "WASMOP_CALL_MEMORY_MIB", default_value_t = 64)]
    pub call_memory_mib: usize,
    /// Plugin calls running at once, across all plugins.
    #[arg(long, env = "WASMOP_MAX_CONCURRENT_CALLS", default_value_t = 8)]
    pub max_concurrent_calls: usize,
    /// Guest memory of all plugin calls in flight together, in MiB: a call whose memory
    /// would grow past it fails (out of memory, retried with backoff) instead of the host
    /// being OOM-killed. Default: the container's memory limit (cgroup `memory.max`) less
    /// what the host keeps for itself and its caches (192 MiB or half the limit, whichever
    /// is larger; never less than one call's cap); without a limit, every call at its cap.
    /// A parsed answer counts against it too; shadow candidates have their own part of it
    /// (their share of the calls, at least a quarter), so they never take an active
    /// decision's memory.
    #[arg(long, env = "WASMOP_GUEST_MEMORY_MIB")]
    pub guest_memory_mib: Option<usize>,
    /// Reconciles of one plugin running at once.
    #[arg(long, env = "WASMOP_CONCURRENCY", default_value_t = 8)]
    pub concurrency: u16,
    /// Milliseconds a reconcile request waits for more events of the same object before it
    /// runs (trailing-edge debounce; 0 runs at once).
    #[arg(long, env = "WASMOP_DEBOUNCE_MS", default_value_t = 0)]
    pub debounce_ms: u64,
    /// How long, in milliseconds, the objects a primary controls may make no progress
    /// before it is decided anyway, while they are on their way (pods created together
    /// turning Running, pods it deleted going away): a change that is only their progress
    /// does not decide it again until the last of them is at rest (Ready, finished or
    /// gone), or none of them made a step for this long (0: every change decides at once).
    /// Each step re-arms the wait, so a slow cluster keeps it however long the whole way
    /// takes; a pod stuck on its way shows in the status this long after the last step. A
    /// pod that waits its turn (not yet scheduled or started, no condition False) is held
    /// while other pods make steps, up to ten times this.
    /// Any other change decides at once. Lower it for a status that shows a stuck pod
    /// sooner.
    #[arg(long, env = "WASMOP_PROGRESS_HOLD_MS", default_value_t = 30000)]
    pub progress_hold_ms: u64,
    /// Largest number of actions in one plan.
    #[arg(long, env = "WASMOP_MAX_ACTIONS", default_value_t = 500)]
    pub max_actions: usize,
    /// Deletions per plugin per minute of objects the plugin does not own (ChaosPod's
    /// victims, for example).
    #[arg(long, env = "WASMOP_DELETE_BUDGET", default_value_t = 30)]
    pub delete_budget: usize,
    /// Seconds to let running reconciles finish after SIGTERM (without leader election; a
    /// leader steps down at once, its writes in flight ending within its renew deadline).
    #[arg(long, env = "WASMOP_SHUTDOWN_SECONDS", default_value_t = 10)]
    pub shutdown_seconds: u64,
    /// Record every plugin's decisions as golden cases under DIR/PLUGIN/ (for `wasmop replay`);
    /// a WasmPlugin's `spec.record` turns it off or on for that plugin (into
    /// /tmp/wasmop-records when no DIR is given).
    #[arg(long, env = "WASMOP_RECORD", value_name = "DIR")]
    pub record: Option<PathBuf>,
    /// Recorded decisions kept per plugin (the oldest go first).
    #[arg(long, env = "WASMOP_RECORD_MAX", default_value_t = 1000)]
    pub record_max: usize,
    /// Most MiB the recorded decisions of all plugins take on disk (the least recently
    /// written go first); within the Deployment's 256Mi `/tmp`.
    #[arg(long, env = "WASMOP_RECORD_MAX_MIB", default_value_t = 128)]
    pub record_max_mib: u64,
    /// Namespace of the plugins' ServiceAccounts, which the host impersonates for every
    /// request a plugin's plans cause (default: the plugin namespace).
    #[arg(long, env = "WASMOP_PLUGIN_SERVICE_ACCOUNT_NAMESPACE")]
    pub plugin_service_account_namespace: Option<String>,
    /// Name of a plugin's ServiceAccount; `{name}` is the plugin's name. `wasmop rbac`
    /// prints the RBAC that grants one what its plugin declares.
    #[arg(long, env = "WASMOP_PLUGIN_SERVICE_ACCOUNT", default_value = crate::principals::identity::DEFAULT_TEMPLATE)]
    pub plugin_service_account: String,
    /// Seconds between two checks of a version waiting for its permissions
    /// (`PermissionsMissing`): it activates once its ServiceAccount holds them.
    #[arg(long, env = "WASMOP_PERMISSIONS_RECHECK_SECONDS", default_value_t = 5)]
    pub permissions_recheck_seconds: u64,
    /// Directory the host keeps what it may need again across restarts: components pulled
    /// from registries (by digest) and every component's compiled form (by digest, wasmtime
    /// version and engine settings), so a restart neither pulls nor compiles. An `emptyDir`
    /// in the Deployment. Without it, each start pulls and compiles.
    #[arg(long, env = "WASMOP_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,
    /// A read-only directory of plugins compiled ahead of time (`wasmop compile`), read
    /// before compiling: the image ships its bundled plugins' compiled form there (its
    /// `WASMOP_COMPILED_SHELF`), so a new pod, whose cache starts empty, starts without
    /// compiling them. Its machine code runs as is: only a directory as trusted as this
    /// binary may be one. A file this host's engine refuses (another wasmtime, engine
    /// configuration or CPU) is passed over and the plugin compiled.
    #[arg(long, env = "WASMOP_COMPILED_SHELF", value_name = "DIR")]
    pub compiled_shelf: Option<PathBuf>,
    /// Most MiB `--cache-dir` holds (pulled artifacts and compiled components together):
    /// over it, the least recently used files go. Within the Deployment's 1Gi `emptyDir`.
    #[arg(long, env = "WASMOP_CACHE_MAX_MIB", default_value_t = 768)]
    pub cache_max_mib: u64,
    /// Seconds a new version that watches differently (other relations, selectors or
    /// finalizer) may take to list its caches; the running version decides meanwhile, and
    /// one whose caches do not list in time is refused (`CachesNotListed`) and offered again.
    #[arg(long, env = "WASMOP_LIST_TIMEOUT_SECONDS", default_value_t = 120)]
    pub list_timeout_seconds: u64,
    /// Seconds a registry has to answer each call of a pull (resolve, manifest, blob).
    #[arg(long, env = "WASMOP_OCI_TIMEOUT_SECONDS", default_value_t = 60)]
    pub oci_timeout_seconds: u64,
    /// The largest component pulled from a registry, in bytes (64 MiB: a Python or
    /// JavaScript component carries its interpreter).
    #[arg(long, env = "WASMOP_OCI_MAX_BYTES", default_value_t = crate::oci::remote::DEFAULT_MAX_BYTES)]
    pub oci_max_bytes: u64,
    /// Where a registry may redirect the host's reads: `same-registry` (the host and port
    /// the reference names), or `anywhere` (registries that serve blobs from another host,
    /// a CDN or a bucket), never to a loopback or link-local address the reference did not
    /// name.
    #[arg(long, env = "WASMOP_REGISTRY_REDIRECTS", default_value = "same-registry",
        value_parser = ["same-registry", "anywhere"])]
    pub registry_redirects: String,
    /// Let WasmPlugins pull over plain HTTP (`insecure: true`): without it such a
    /// WasmPlugin is refused, so none sends its pull secret's credentials in clear by
    /// itself.
    #[arg(long, env = "WASMOP_ALLOW_INSECURE_REGISTRIES")]
    pub allow_insecure_registries: bool,
    /// A CA certificate (PEM) trusted for registries besides the system's; repeatable.
    #[arg(
        long = "registry-ca",
        env = "WASMOP_REGISTRY_CA",
        value_delimiter = ','
    )]
    pub registry_ca: Vec<PathBuf>,
    /// A public key (PEM, ECDSA P-256, cosign's `cosign.pub`) trusted to sign plugins of
    /// every WasmPlugin; repeatable.
    #[arg(
        long = "trusted-key",
        env = "WASMOP_TRUSTED_KEYS",
        value_delimiter = ','
    )]
    pub trusted_keys: Vec<PathBuf>,
    /// Refuse every OCI source without a valid signature by a key of `--trusted-key`. A
    /// WasmPlugin's `publicKeys` may narrow that set (require one of its keys), never widen
    /// it, unless the host runs with `--allow-plugin-keys`.
    #[arg(long, env = "WASMOP_REQUIRE_SIGNATURE")]
    pub require_signature: bool,
    /// Let a WasmPlugin's `publicKeys` add keys to the `--trusted-key` set: whoever may
    /// write WasmPlugins and the ConfigMaps or Secrets they name then decides which
    /// signatures count. Off by default: trust roots are the admin's.
    #[arg(long, env = "WASMOP_ALLOW_PLUGIN_KEYS")]
    pub allow_plugin_keys: bool,
    /// Grant a plugin a host its plans may send requests to: `PLUGIN=scheme://host[:port]`
    /// (`dns=https://api.example.com`, `dns=https://*.example.com`); repeatable. A request
    /// must match a host the plugin declares and one granted here. A loopback or
    /// link-local address is reached only when a grant names its host itself (no `*.`);
    /// the cluster's API server never.
    #[arg(
        long = "outbound-grant",
        env = "WASMOP_OUTBOUND_GRANTS",
        value_delimiter = ',',
        value_name = "PLUGIN=ORIGIN"
    )]
    pub outbound_grants: Vec<String>,
    /// Longest wait, in milliseconds, for one attempt of a request outside the cluster
    /// (connecting, sending, reading the answer).
    #[arg(long, env = "WASMOP_OUTBOUND_TIMEOUT_MS", default_value_t = 10_000)]
    pub outbound_timeout_ms: u64,
    /// The most bytes of an answer's body kept for the plugin (the rest is cut and the
    /// answer says `truncated`); at most 16384, as the answers live on the primary.
    #[arg(long, env = "WASMOP_OUTBOUND_MAX_BODY_BYTES", default_value_t = 8192,
        value_parser = clap::value_parser!(u32).range(0..=16384))]
    pub outbound_max_body_bytes: u32,
    /// Requests outside the cluster of one plugin in flight at once.
    #[arg(long, env = "WASMOP_OUTBOUND_CONCURRENCY", default_value_t = 8,
        value_parser = clap::value_parser!(u32).range(1..))]
    pub outbound_concurrency: u32,
    /// Requests outside the cluster one plugin may begin per second.
    #[arg(long, env = "WASMOP_OUTBOUND_PER_SECOND", default_value_t = 50,
        value_parser = clap::value_parser!(u32).range(1..))]
    pub outbound_per_second: u32,
    /// Attempts after the first for a request the plugin marked `retry` (after a failure,
    /// 429 or 5xx; with backoff from 200 ms).
    #[arg(long, env = "WASMOP_OUTBOUND_RETRIES", default_value_t = 3)]
    pub outbound_retries: u32,
    /// TESTS ONLY: send plans without the guard's checks, so that a test can show what the
    /// API server refuses on its own. Never in a real deployment.
    #[arg(long, env = "WASMOP_UNSAFE_DISABLE_GUARD", hide = true)]
    pub unsafe_disable_guard: bool,
    /// Export what plugins log (their `log` lines, stdout and stderr) as span events when
    /// traces are on; off by default: a plugin may log what it read, and the trace backend
    /// is another audience than the host's log.
    #[arg(long, env = "WASMOP_TRACE_GUEST_LOGS")]
    pub trace_guest_logs: bool,
    /// Log format: `text` or `json`.
    #[arg(long, env = "WASMOP_LOG_FORMAT", default_value = "text", value_parser = ["text", "json"])]
    pub log_format: String,
}
