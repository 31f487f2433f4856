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
}

/// Applies the RBAC `wasm` declares (as `wasmop rbac --cluster` prints it, ServiceAccounts in
/// `default`, the host's plugin namespace here) with the developer's own credentials.
async fn grant(kubeconfig: Option<&std::path::Path>, wasm: &std::path::Path) -> anyhow::Result<()> {
    let sandbox = crate::runtime::Sandbox::new(1)?;
    let plugin =
        crate::offline::load::load_file(&sandbox, wasm, crate::runtime::Limits::default())?;
    let scope = crate::principals::manifest::Scope {
        naming: crate::principals::identity::Naming {
            namespace: "default".into(),
            template: crate::principals::identity::DEFAULT_TEMPLATE.into(),
        },
        namespace: None,
        host_service_account: "wasmop".into(),
        sharding: false,
    };
    let docs = crate::principals::manifest::manifests(&plugin.info, &scope)?;
    let client = crate::operator::client(kubeconfig).await?;
    crate::principals::apply::apply(&client, &docs).await?;
    println!(
        "dev: granted what {} declares to ServiceAccount default/{} (wasmop rbac; --no-grant leaves it to an admin)",
        plugin.info.name,
        scope.naming.service_account(&plugin.info.name)
    );
    Ok(())
}

/// Runs `wasmop dev` until interrupted (Ctrl-C or SIGTERM).
pub async fn run(args: &DevArgs) -> anyhow::Result<()> {
    let krate = build::Crate::open(&args.dir).await?;
    let work = tempdir()?;
    let plugins = work.join("plugins");
    std::fs::create_dir_all(&plugins)?;

    println!("dev: building {} ...", krate.name);
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
    if !args.no_grant {
        grant(
            kubeconfig.as_deref(),
            &plugins.join(first.file_name().unwrap_or_default()),
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
                if !args.no_grant
                    && crate::runtime::digest_of(&bytes) != digest
                    && let Err(e) = grant(kubeconfig.as_deref(), &wasm).await
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

fn tempdir() -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("wasmop-dev-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}
