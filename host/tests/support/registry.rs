//! A real OCI registry on loopback for one test (Debian's docker-registry, distribution
//! 2.8, started by `tests/registry/up` with TLS and htpasswd auth), stopped when dropped;
//! keys made by openssl; artifacts published with `wasmop publish` or written by hand with
//! curl, the way another tool would.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::support::repo;

/// A registry started for one test.
pub struct Registry {
    /// Its state directory.
    pub state: PathBuf,
    /// `127.0.0.1:PORT`.
    pub address: String,
    /// The test CA that signed its certificate.
    pub ca: PathBuf,
    /// The user and password it accepts.
    pub user: (String, String),
}

fn env_file(state: &Path) -> HashMap<String, String> {
    std::fs::read_to_string(state.join("env"))
        .expect("the registry's env file")
        .lines()
        .filter_map(|l| l.strip_prefix("export "))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| {
            (
                k.to_string(),
                v.trim_matches('"').trim_matches('\'').to_string(),
            )
        })
        .collect()
}

impl Registry {
    /// Starts a registry with TLS and basic auth (user `wasmop`).
    pub fn start(tag: &str) -> Registry {
        let state =
            std::env::temp_dir().join(format!("wasmop-registry-{tag}-{}", std::process::id()));
        let mut reg = Registry {
            state,
            address: String::new(),
            ca: PathBuf::new(),
            user: ("wasmop".into(), "s3cret-pw".into()),
        };
        reg.up(None);
        reg
    }

    fn up(&mut self, port: Option<&str>) {
        let auth = format!("{}:{}", self.user.0, self.user.1);
        let mut cmd = Command::new(repo().join("tests/registry/up"));
        cmd.arg("--state")
            .arg(&self.state)
            .args(["--tls", "--auth", &auth]);
        if let Some(p) = port {
            cmd.args(["--port", p]);
        }
        let ok = cmd
            .stdout(Stdio::inherit())
            .stderr(Stdio::inherit())
            .status()
            .expect("run tests/registry/up")
            .success();
        assert!(ok, "tests/registry/up failed");
        let env = env_file(&self.state);
        self.address = env["WASMOP_REGISTRY"].clone();
        self.ca = PathBuf::from(&env["WASMOP_REGISTRY_CA"]);
    }

    /// Stops the server, keeping its data and port (the registry "goes away").
    pub fn stop(&self) {
        let ok = Command::new(repo().join("tests/registry/down"))
            .arg("--state")
            .arg(&self.state)
            .arg("--keep")
            .status()
            .expect("run tests/registry/down")
            .success();
        assert!(ok, "tests/registry/down --keep failed");
    }

    /// Starts it again on the same port, with the same data.
    pub fn restart(&mut self) {
        let port = self.address.rsplit(':').next().unwrap().to_string();
        self.up(Some(&port));
    }

    /// A Docker config (`config.json`, `.dockerconfigjson`) logging in as its user with
    /// `password`.
    pub fn docker_config(&self, password: &str) -> serde_json::Value {
        use base64::Engine as _;
        let auth =
            base64::engine::general_purpose::STANDARD.encode(format!("{}:{password}", self.user.0));
        serde_json::json!({"auths": {self.address.clone(): {"auth": auth}}})
    }

    /// A `kubernetes.io/dockerconfigjson` Secret `name` in `default` logging in with
    /// `password`, applied to `cluster`.
    pub fn pull_secret(&self, cluster: &crate::support::Cluster, name: &str, password: &str) {
        use base64::Engine as _;
        let config = self.docker_config(password).to_string();
        let b64 = base64::engine::general_purpose::STANDARD.encode(config.as_bytes());
        cluster.apply_yaml(
            &serde_json::json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": name, "namespace": "default"},
                "type": "kubernetes.io/dockerconfigjson",
                "data": {".dockerconfigjson": b64}})
            .to_string(),
        );
    }

    /// `ADDRESS/REPO` (a reference without tag).
    pub fn repo(&self, repo: &str) -> String {
        format!("{}/{repo}", self.address)
    }

    /// `wasmop publish FILE ADDRESS/REF` (signed with `key` if given); the manifest digest.
    pub fn publish(&self, file: &Path, reference: &str, key: Option<&Path>) -> String {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_wasmop"));
        cmd.arg("publish")
            .arg(file)
            .arg(format!("{}/{reference}", self.address))
            .arg("--registry-ca")
            .arg(&self.ca)
            .args(["--username", &self.user.0])
            .env("WASMOP_REGISTRY_PASSWORD", &self.user.1);
        if let Some(k) = key {
            cmd.arg("--sign").arg(k);
        }
        let out = cmd.output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(
            out.status.success(),
            "wasmop publish: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let digest = text.lines().last().unwrap().trim().to_string();
        assert!(digest.starts_with("sha256:"), "{text}");
        digest
    }

    /// The raw manifest at `REPO:REFERENCE` (a tag or a digest), as the registry stores it.
    pub fn get_manifest(&self, repo: &str, reference: &str) -> Vec<u8> {
        let out = self
            .curl()
            .args([
                "-H",
                "Accept: application/vnd.oci.image.manifest.v1+json",
                &format!("https://{}/v2/{repo}/manifests/{reference}", self.address),
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    }

    fn curl(&self) -> Command {
        let mut c = Command::new("curl");
        c.args(["-sS", "--fail-with-body", "--cacert"])
            .arg(&self.ca)
            .args(["-u", &format!("{}:{}", self.user.0, self.user.1)]);
        c
    }

    /// Puts `manifest` under `REPO:TAG` with `media_type` (curl); returns its digest.
    pub fn put_manifest(
        &self,
        repo: &str,
        tag: &str,
        manifest: &serde_json::Value,
        media_type: &str,
    ) -> String {
        let body = serde_json::to_vec(manifest).unwrap();
        self.put_file(
            &format!("https://{}/v2/{repo}/manifests/{tag}", self.address),
            media_type,
            &body,
        );
        sha256(&body)
    }

    /// Pushes `component` under `REPO:TAG` as another tool writing the CNCF wasm layout
    /// would (curl, no wasmop code); returns the manifest digest.
    pub fn push_raw(&self, repo: &str, tag: &str, component: &[u8]) -> String {
        let config = br#"{"architecture":"wasm","os":"wasip2","layerDigests":[],"component":null,"created":"2026-01-01T00:00:00Z"}"#;
        let layer = self.put_blob(repo, component);
        let cfg = self.put_blob(repo, config);
        let manifest = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.wasm.config.v0+json", "digest": cfg, "size": config.len()},
            "layers": [{"mediaType": "application/wasm", "digest": layer, "size": component.len()}],
        });
        self.put_manifest(
            repo,
            tag,
            &manifest,
            "application/vnd.oci.image.manifest.v1+json",
        )
    }

    /// Pushes blob `bytes` into `repo` (curl: POST, then PUT with the digest); its digest.
    pub fn put_blob(&self, repo: &str, bytes: &[u8]) -> String {
        let digest = sha256(bytes);
        // POST opens an upload; PUT to its Location with the digest closes it.
        let out = self
            .curl()
            .args(["-X", "POST", "-D", "-", "-o", "/dev/null"])
            .arg(format!("https://{}/v2/{repo}/blobs/uploads/", self.address))
            .output()
            .unwrap();
        let headers = String::from_utf8_lossy(&out.stdout).to_string();
        let location = headers
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case("location")
                    .then(|| v.trim().to_string())
            })
            .unwrap_or_else(|| panic!("no Location: {headers}"));
        let url = if location.starts_with("http") {
            location
        } else {
            format!("https://{}{location}", self.address)
        };
        let sep = if url.contains('?') { '&' } else { '?' };
        self.put_file(
            &format!("{url}{sep}digest={digest}"),
            "application/octet-stream",
            bytes,
        );
        digest
    }
}

impl Registry {
    /// `curl -X PUT` of `bytes` to `url` with `content_type`, which must succeed.
    fn put_file(&self, url: &str, content_type: &str, bytes: &[u8]) {
        let file = self.state.join("upload");
        std::fs::write(&file, bytes).unwrap();
        let out = self
            .curl()
            .args([
                "-X",
                "PUT",
                "-H",
                &format!("Content-Type: {content_type}"),
                "--data-binary",
            ])
            .arg(format!("@{}", file.display()))
            .arg(url)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "PUT {url}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = Command::new(repo().join("tests/registry/down"))
            .arg("--state")
            .arg(&self.state)
            .status();
    }
}

/// `sha256:<hex>` of `bytes` (by sha256sum, so the test shares no code with the host).
pub fn sha256(bytes: &[u8]) -> String {
    use std::io::Write;
    let mut child = Command::new("sha256sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(bytes).unwrap();
    let out = child.wait_with_output().unwrap();
    format!(
        "sha256:{}",
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .next()
            .unwrap()
    )
}

/// An ECDSA P-256 key pair made by openssl in `dir`: (private PKCS#8 PEM, public PEM).
pub fn keypair(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let key = dir.join(format!("{name}.key"));
    let public = dir.join(format!("{name}.pub"));
    let ok = Command::new("openssl")
        .args([
            "genpkey",
            "-algorithm",
            "EC",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-out",
        ])
        .arg(&key)
        .status()
        .unwrap()
        .success()
        && Command::new("openssl")
            .args(["pkey", "-pubout", "-in"])
            .arg(&key)
            .arg("-out")
            .arg(&public)
            .status()
            .unwrap()
            .success();
    assert!(ok, "openssl could not make a key pair");
    (key, public)
}
