//! `wasmop dev DIR`: an author's loop. Builds the plugin crate in DIR, runs the host with it
//! against the current kubeconfig (or a local control plane it starts, `--local`), installs
//! its CRD, and on every saved change rebuilds and hot-swaps the new version into the running
//! host. A version that does not build is reported with the compiler's messages and the
//! running one stays, as with any upload that fails.
//!
//! Split by concern: [`watch`] (what changed in the crate), [`build`] (cargo and the
//! component it writes), [`local`] (the local control plane of a wasmop checkout).

pub mod build;
pub mod local;
pub mod watch;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio::process::Command;

/// Arguments of `wasmop dev`.
#[derive(Debug, clap::Args)]
pub struct DevArgs {
    /// The plugin crate (a directory with Cargo.toml, as `wasmop new` makes it).
    #[arg(default_value = ".")]
    pub dir: PathBuf,
    /// Kubeconfig file (default: `$KUBECONFIG` or `~/.kube/config`).
    #[arg(long, env = "WASMOP_KUBECONFIG", conflicts_with = "local")]
    pub kubeconfig: Option<PathBuf>,
    /// Start a local control plane for the session (needs a wasmop checkout: its
    /// `tests/cluster`), and stop it at the end.
    #[arg(long)]
    pub local: bool,
    /// Where the host serves /healthz, /readyz and /metrics.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: std::net::SocketAddr,
    /// How often to look for saved changes, in milliseconds.
    #[arg(long, default_value_t = 300)]
    pub poll_ms: u64,
    /// Do not apply the RBAC the plugin declares (`wasmop rbac`) after each build: leave it
    /// to an admin (a version that declares more then waits with `PermissionsMissing`).
    #[arg(long)]
    pub no_grant: bool,
    /// The namespace the host watches and acts in, and the one the plugin's grant covers
    /// (a Role there; cluster-wide only for cluster-scoped kinds the plugin declares).
    #[arg(long, short = 'n', default_value = "default")]
    pub namespace: String,
    /// Use a cluster that is not on this machine without asking (the current kubeconfig
    /// context's API server is not a loopback address): dev grants the plugin's RBAC and
    /// runs a host there.
    #[arg(long)]
    pub yes: bool,
}

/// Whether the API server of `url` is on this machine (a loopback address or `localhost`).
fn is_local(url: &http::Uri) -> bool {
    match url.host() {
        Some("localhost") => true,
        Some(h) => h
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback()),
        None => false,
    }
}

/// Before dev touches a cluster that is not on this machine: asks on a terminal, refuses
/// without one unless `--yes`.
async fn confirm_cluster(kubeconfig: Option<&std::path::Path>, yes: bool) -> anyhow::Result<()> {
    let config = crate::k8s::client::client_config(kubeconfig).await?;
    if is_local(&config.cluster_url) || yes {
        return Ok(());
    }
    let what = format!(
        "the kubeconfig's API server {} is not on this machine: dev would grant the plugin's RBAC and run a host against it",
        config.cluster_url
    );
    use std::io::{BufRead, IsTerminal, Write};
    if !std::io::stdin().is_terminal() {
        anyhow::bail!("{what}; pass --yes to go ahead, or --local for a local control plane");
    }
    print!("dev: {what}. Go ahead? [y/N] ");
    std::io::stdout().flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    if matches!(answer.trim(), "y" | "Y" | "yes") {
        Ok(())
    } else {
        anyhow::bail!("stopped: {what}")
    }
}

/// Applies the RBAC `wasm` declares (as `wasmop rbac --namespace NS` prints it,
/// ServiceAccounts in `default`, the host's plugin namespace here) with the developer's own
/// credentials: a Role in `namespace`, the host's only one; cluster-wide only when the plugin
/// declares cluster-scoped kinds.
async fn grant(
    client: &kube::Client,
    wasm: &std::path::Path,
    namespace: &str,
) -> anyhow::Result<()> {
    let sandbox = crate::runtime::Sandbox::new(1)?;
    let plugin = crate::cases::load::load_file(&sandbox, wasm, crate::runtime::Limits::default())?;
    let mut scope = crate::principals::manifest::Scope {
        naming: crate::principals::identity::Naming {
            namespace: "default".into(),
            template: crate::principals::identity::DEFAULT_TEMPLATE.into(),
        },
        namespace: Some(namespace.into()),
        host_service_account: "wasmop".into(),
        sharding: false,
    };
    let docs = match crate::principals::manifest::manifests(&plugin.info, &scope) {
        Ok(docs) => docs,
        Err(e) => {
            println!("dev: {e:#}; granting cluster-wide");
            scope.namespace = None;
            crate::principals::manifest::manifests(&plugin.info, &scope)?
        }
    };
    crate::principals::apply::apply(client, &docs).await?;
    println!(
        "dev: granted what {} declares to ServiceAccount default/{} in {} (wasmop rbac; --no-grant leaves it to an admin)",
        plugin.info.name,
        scope.naming.service_account(&plugin.info.name),
        scope
            .namespace
            .as_deref()
            .map_or("every namespace".to_string(), |n| format!("namespace {n}"))
    );
    Ok(())
}

/// Runs `wasmop dev` until interrupted (Ctrl-C or SIGTERM).
pub async fn run(args: &DevArgs) -> anyhow::Result<()> {
    if !args.local {
        confirm_cluster(args.kubeconfig.as_deref(), args.yes).await?;
    }
    let krate = crate::cmd::project::Project::open(&args.dir).await?;
    let work = private_dir(&std::env::temp_dir(), "wasmop-dev")?;
    let plugins = work.join("plugins");
    std::fs::create_dir_all(&plugins)?;

    println!("dev: building {} ({}) ...", krate.name, krate.lang.name());
    let started = Instant::now();
    let first = krate.build().await?.ok_or_else(|| {
        anyhow::anyhow!(
            "the plugin does not build: fix the errors above and run `wasmop dev` again"
        )
    })?;
    let mut digest = build::install(&first, &plugins)?;
    println!(
        "dev: built in {:.1} s ({digest})",
        started.elapsed().as_secs_f64()
    );

    let cluster = if args.local {
        Some(local::LocalCluster::start(&work.join("cluster")).await?)
    } else {
        None
    };
    let kubeconfig = match &cluster {
        Some(c) => {
            println!(
                "dev: local control plane up; for kubectl: export KUBECONFIG={}",
                c.kubeconfig.display()
            );
            Some(c.kubeconfig.clone())
        }
        None => args.kubeconfig.clone(),
    };
    // The cluster is pinned now: every grant of this session goes to it, whatever the
    // kubeconfig's current context says later.
    let pinned = crate::k8s::client::client_config(kubeconfig.as_deref()).await?;
    let cluster_url = pinned.cluster_url.clone();
    let client = kube::Client::try_from(pinned)?;
    if !args.no_grant {
        grant(
            &client,
            &plugins.join(first.file_name().unwrap_or_default()),
            &args.namespace,
        )
        .await
        .context("granting the plugin's RBAC")?;
    }
    let mut host = Command::new(std::env::current_exe()?);
    host.arg("run")
        .arg("--plugins")
        .arg(&plugins)
        .arg("--install-crds")
        // The plugin comes from this directory only: an upload of the same name would win.
        .arg("--no-uploads")
        .args(["--namespace", &args.namespace])
        .args(["--plugins-poll-seconds", "1"])
        .arg("--listen")
        .arg(args.listen.to_string())
        .kill_on_drop(true);
    if let Some(k) = &kubeconfig {
        host.arg("--kubeconfig").arg(k);
    }
    let mut host = host.spawn().context("starting the host")?;
    println!(
        "dev: host running (pid {}), /metrics on {}; watching {} for changes (Ctrl-C stops)",
        host.id().unwrap_or_default(),
        args.listen,
        krate.dir.display()
    );

    let mut seen = watch::Sources::look(&krate.dir);
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let outcome = loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => break Ok(()),
            _ = term.recv() => break Ok(()),
            status = host.wait() => break Err(anyhow::anyhow!("the host stopped: {}", status?)),
            _ = tokio::time::sleep(Duration::from_millis(args.poll_ms)) => {}
        }
        let now = watch::Sources::look(&krate.dir);
        if now == seen {
            continue;
        }
        // Wait until the files stop changing (an editor writes in several steps).
        tokio::time::sleep(Duration::from_millis(args.poll_ms)).await;
        seen = watch::Sources::look(&krate.dir);
        println!("dev: change saved; building ...");
        let started = Instant::now();
        match krate.build().await {
            Ok(Some(wasm)) => {
                // Granted before the host sees the file, so a version that declares more
                // is not refused first.
                let bytes =
                    std::fs::read(&wasm).with_context(|| format!("reading {}", wasm.display()))?;
                if let Ok(now) = crate::k8s::client::client_config(kubeconfig.as_deref()).await
                    && now.cluster_url != cluster_url
                {
                    println!(
                        "dev: the kubeconfig now points at {}; this session keeps granting and running on {cluster_url}, where it started (start dev again to switch)",
                        now.cluster_url
                    );
                }
                if !args.no_grant
                    && crate::runtime::digest_of(&bytes) != digest
                    && let Err(e) = grant(&client, &wasm, &args.namespace).await
                {
                    println!("dev: could not grant the plugin's RBAC: {e:#}");
                }
                let new = build::install(&wasm, &plugins)?;
                if new == digest {
                    println!("dev: built; the component did not change");
                } else {
                    digest = new;
                    println!(
                        "dev: built in {:.1} s ({digest}); the host swaps it in",
                        started.elapsed().as_secs_f64()
                    );
                }
            }
            Ok(None) => println!("dev: the build failed (see above); the running version stays"),
            Err(e) => println!("dev: cannot build: {e:#}; the running version stays"),
        }
    };
    stop(&mut host).await;
    if let Some(c) = cluster {
        c.stop().await;
    }
    let _ = std::fs::remove_dir_all(&work);
    outcome
}

/// Stops the host as SIGTERM would (its controllers finish their reconciles), killing it
/// if it has not stopped within 15 s.
async fn stop(host: &mut tokio::process::Child) {
    if let Some(pid) = host.id() {
        let _ = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .await;
    }
    if tokio::time::timeout(Duration::from_secs(15), host.wait())
        .await
        .is_err()
    {
        let _ = host.kill().await;
    }
}

/// A new directory under `base` that only this user may enter (mode 0700), never one that
/// existed before (a name another user made in a shared `/tmp` is skipped, not reused).
fn private_dir(base: &std::path::Path, prefix: &str) -> anyhow::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    for attempt in 0..100u32 {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .subsec_nanos();
        let dir = base.join(format!(
            "{prefix}-{}-{nanos:08x}{attempt:02x}",
            std::process::id()
        ));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e).with_context(|| format!("creating {}", dir.display())),
        }
    }
    anyhow::bail!(
        "could not create a private directory under {}",
        base.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_work_directory_is_new_and_private() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let base = std::env::temp_dir().join(format!("wasmop-private-test-{}", std::process::id()));
        std::fs::create_dir_all(&base).unwrap();
        // The name an earlier version used, made by someone else beforehand: not reused.
        let squatted = base.join(format!("wasmop-dev-{}", std::process::id()));
        std::fs::create_dir_all(&squatted).unwrap();
        std::fs::write(squatted.join("planted"), "x").unwrap();
        let a = private_dir(&base, "wasmop-dev").unwrap();
        let b = private_dir(&base, "wasmop-dev").unwrap();
        assert_ne!(a, b);
        for d in [&a, &b] {
            assert_ne!(d, &squatted);
            let meta = std::fs::metadata(d).unwrap();
            assert_eq!(meta.permissions().mode() & 0o777, 0o700, "{}", d.display());
            assert_eq!(meta.uid(), std::fs::metadata(&base).unwrap().uid());
            assert_eq!(std::fs::read_dir(d).unwrap().count(), 0, "new and empty");
        }
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn only_loopback_api_servers_are_local() {
        for url in [
            "https://127.0.0.1:6443",
            "https://127.0.5.1",
            "https://localhost:6443",
            "https://[::1]:6443",
        ] {
            assert!(is_local(&url.parse().unwrap()), "{url}");
        }
        for url in [
            "https://10.0.0.1:6443",
            "https://k8s.example.com",
            "https://[2001:db8::1]:443",
        ] {
            assert!(!is_local(&url.parse().unwrap()), "{url}");
        }
    }
}
