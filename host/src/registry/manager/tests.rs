//! The registry's identity rules and its lock, against a fake [`Runner`]: no API server,
//! real plugin components (built by `make plugins`), controllers that only wait for their
//! stop and say what happened to them.

use std::sync::Mutex as StdMutex;

use tokio::sync::Notify;

use super::*;
use crate::registry::runner::Stop;
use crate::telemetry::health::ReadyFlag;

/// What the fake was asked, in order: `prepare NAME`, `start NAME`, `stopped NAME`,
/// `release NAME FINALIZER`.
type Log = Arc<StdMutex<Vec<String>>>;

struct Fake {
    sandbox: Sandbox,
    log: Log,
    /// Every approval is refused with this, when set.
    refuse: StdMutex<Option<Rejection>>,
    /// When set, an approval waits until it is notified (a slow SubjectAccessReview).
    hold: StdMutex<Option<Arc<Notify>>>,
    /// When set, the caches a controller prepares list only once it is notified (a slow
    /// or failing watch).
    unlisted: StdMutex<Option<Arc<Notify>>>,
}

impl Fake {
    fn new() -> Arc<Fake> {
        Arc::new(Fake {
            sandbox: Sandbox::new(2).unwrap(),
            log: Log::default(),
            refuse: StdMutex::default(),
            hold: StdMutex::default(),
            unlisted: StdMutex::default(),
        })
    }

    fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

struct FakeReady {
    name: String,
    log: Log,
    unlisted: Option<Arc<Notify>>,
}

impl Prepared for FakeReady {
    fn listed(&self) -> futures::future::BoxFuture<'static, ()> {
        let unlisted = self.unlisted.clone();
        Box::pin(async move {
            if let Some(n) = unlisted {
                n.notified().await;
            }
        })
    }

    fn start(
        self: Box<Self>,
        _slot: Arc<PluginSlot>,
        synced: ReadyFlag,
        _reconcile_all: mpsc::UnboundedReceiver<()>,
        stop: Stop,
    ) -> JoinHandle<()> {
        self.log
            .lock()
            .unwrap()
            .push(format!("start {}", self.name));
        synced.set(true);
        tokio::spawn(async move {
            stop.await;
            self.log
                .lock()
                .unwrap()
                .push(format!("stopped {}", self.name));
        })
    }
}

impl Runner for Fake {
    fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }

    fn approve<'a>(
        &'a self,
        _info: &'a PluginInfo,
    ) -> futures::future::BoxFuture<'a, Result<(), Rejection>> {
        Box::pin(async move {
            let hold = self.hold.lock().unwrap().clone();
            if let Some(hold) = hold {
                hold.notified().await;
            }
            match self.refuse.lock().unwrap().clone() {
                Some(r) => Err(r),
                None => Ok(()),
            }
        })
    }

    fn prepare(&self, info: &PluginInfo) -> Box<dyn Prepared> {
        self.log
            .lock()
            .unwrap()
            .push(format!("prepare {}", info.name));
        Box::new(FakeReady {
            name: info.name.clone(),
            log: self.log.clone(),
            unlisted: self.unlisted.lock().unwrap().clone(),
        })
    }

    fn release_finalizer<'a>(
        &'a self,
        info: &'a PluginInfo,
        fin: &'a str,
    ) -> futures::future::BoxFuture<'a, ()> {
        self.log
            .lock()
            .unwrap()
            .push(format!("release {} {fin}", info.name));
        Box::pin(std::future::ready(()))
    }
}

/// What the fake is asked when podreplica's controller restarts for a version that watches
/// differently: the new caches taken before the old controller stops.
const RESTARTED: [&str; 5] = [
    "prepare podreplica",
    "start podreplica",
    "prepare podreplica",
    "stopped podreplica",
    "start podreplica",
];

fn manager(fake: &Arc<Fake>) -> (Manager, watch::Sender<bool>) {
    let (tx, rx) = watch::channel(false);
    let m = Manager::new(
        fake.clone(),
        Arc::new(Health::new()),
        Arc::new(Metrics::new()),
        Limits::default(),
        rx,
    );
    (m, tx)
}

/// A built plugin component (`make plugins`).
fn component(file: &str) -> Vec<u8> {
    let dir = std::env::var("WASMOP_PLUGIN_DIR").unwrap_or_else(|_| {
        let target = std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "../target".into());
        format!("{target}/wasm32-wasip2/plugin")
    });
    let path = format!("{dir}/{file}");
    std::fs::read(&path)
        .unwrap_or_else(|e| panic!("{path}: {e}; build the plugins first with `make plugins`"))
}

fn file(name: &str) -> Origin {
    Origin::file(std::path::Path::new(&format!("/plugins/{name}.wasm")))
}

fn upload(name: &str) -> Origin {
    Origin::upload("wasmop-system", name)
}

fn reason(r: Result<Accepted, Rejection>) -> Reason {
    r.expect_err("refused").reason
}

#[tokio::test]
async fn a_source_keeps_its_plugin_and_a_primary_kind_has_one_plugin() {
    let fake = Fake::new();
    let (m, _stop) = manager(&fake);
    let a = m
        .offer(&file("a"), component("podreplica.wasm"))
        .await
        .unwrap();
    assert_eq!(a.change, Change::Started);
    // The same source turning into another plugin.
    let renamed = component("podreplica_renamed.wasm");
    assert_eq!(
        reason(m.offer(&file("a"), renamed.clone()).await),
        Reason::NameChanged
    );
    // Another source claiming the same primary kind under another name.
    assert_eq!(
        reason(m.offer(&file("b"), renamed).await),
        Reason::PrimaryKindClaimed
    );
    // Another file of the same name.
    assert_eq!(
        reason(m.offer(&file("b"), component("podreplica_v2.wasm")).await),
        Reason::NameTaken
    );
    // A plugin of its own kind runs beside it.
    let c = m
        .offer(&file("c"), component("chaospod.wasm"))
        .await
        .unwrap();
    assert_eq!(c.change, Change::Started);
    let mut running: Vec<_> = m.running().await.into_iter().map(|r| (r.0, r.2)).collect();
    running.sort();
    assert_eq!(
        running,
        [
            ("chaospod".to_string(), file("c")),
            ("podreplica".to_string(), file("a"))
        ]
    );
    assert_eq!(
        fake.log(),
        [
            "prepare podreplica",
            "start podreplica",
            "prepare chaospod",
            "start chaospod"
        ]
    );
}

#[tokio::test]
async fn an_upload_wins_over_a_file_at_any_time() {
    let fake = Fake::new();
    let (m, _stop) = manager(&fake);
    m.offer(&file("p"), component("podreplica.wasm"))
        .await
        .unwrap();
    // The same bytes from an upload: the plugin now runs from the upload, untouched.
    let same = m
        .offer(&upload("p"), component("podreplica.wasm"))
        .await
        .unwrap();
    assert_eq!(same.change, Change::Unchanged);
    assert_eq!(m.origin_of("podreplica").await, Some(upload("p")));
    // The file again is superseded, and a second upload of the name is refused.
    assert_eq!(
        reason(m.offer(&file("p"), component("podreplica_v2.wasm")).await),
        Reason::Superseded
    );
    assert_eq!(
        reason(m.offer(&upload("q"), component("podreplica_v2.wasm")).await),
        Reason::NameTaken
    );
    // A new version from the upload swaps in place: no controller restarts.
    let v2 = m
        .offer(&upload("p"), component("podreplica_v2.wasm"))
        .await
        .unwrap();
    assert_eq!(v2.change, Change::Swapped);
    assert_eq!(fake.log(), ["prepare podreplica", "start podreplica"]);
    // Once the upload is gone, the file may run it again.
    m.remove(&upload("p")).await;
    assert_eq!(m.origin_of("podreplica").await, None);
    let back = m
        .offer(&file("p"), component("podreplica.wasm"))
        .await
        .unwrap();
    assert_eq!(back.change, Change::Started);
    assert_eq!(
        fake.log(),
        [
            "prepare podreplica",
            "start podreplica",
            "stopped podreplica",
            "prepare podreplica",
            "start podreplica"
        ]
    );
}

#[tokio::test]
async fn a_version_that_watches_differently_restarts_its_controller_with_caches_taken_first() {
    let fake = Fake::new();
    let (m, _stop) = manager(&fake);
    m.offer(&file("p"), component("podreplica.wasm"))
        .await
        .unwrap();
    let v3 = m
        .offer(&file("p"), component("podreplica_v3.wasm"))
        .await
        .unwrap();
    assert_eq!(v3.change, Change::Restarted);
    // The new controller's caches are taken before the old controller stops.
    assert_eq!(fake.log(), RESTARTED);
    // The same bytes again change nothing.
    let again = m
        .offer(&file("p"), component("podreplica_v3.wasm"))
        .await
        .unwrap();
    assert_eq!(again.change, Change::Unchanged);
    assert_eq!(fake.log().len(), 5);
}

#[tokio::test]
async fn a_refused_version_leaves_the_running_one_and_a_removed_plugin_lets_its_finalizer_go() {
    let fake = Fake::new();
    let (m, _stop) = manager(&fake);
    m.offer(&upload("h"), component("wasmop_hostile.wasm"))
        .await
        .unwrap();
    let before = m.running().await;
    *fake.refuse.lock().unwrap() = Some(Rejection::new(
        Reason::PermissionsMissing,
        "serviceaccount lacks configmaps create",
    ));
    let refused = m
        .offer(&upload("h"), component("wasmop_hostile_more.wasm"))
        .await
        .unwrap_err();
    assert_eq!(refused.reason, Reason::PermissionsMissing);
    assert_eq!(refused.plugin.as_deref(), Some("hostile"));
    assert!(refused.waits_for_permissions());
    assert_eq!(m.running().await, before);
    // A version that does not even load names no plugin and changes nothing.
    let garbage = m
        .offer(&upload("h"), b"not wasm".to_vec())
        .await
        .unwrap_err();
    assert_eq!(garbage.reason, Reason::NotAComponent);
    assert!(!garbage.waits_for_permissions());
    assert_eq!(m.running().await, before);
    m.remove(&upload("h")).await;
    assert_eq!(
        fake.log(),
        [
            "prepare hostile",
            "start hostile",
            "stopped hostile",
            "release hostile test.wasmop.dev/cleanup"
        ]
    );
}

#[tokio::test]
async fn readers_do_not_wait_for_an_offer_under_way() {
    let fake = Fake::new();
    let (m, _stop) = manager(&fake);
    let m = Arc::new(m);
    m.offer(&file("c"), component("chaospod.wasm"))
        .await
        .unwrap();
    let hold = Arc::new(Notify::new());
    *fake.hold.lock().unwrap() = Some(hold.clone());
    let offer = tokio::spawn({
        let m = m.clone();
        async move { m.offer(&file("p"), component("podreplica.wasm")).await }
    });
    // The offer compiles, then waits in its approval (a SubjectAccessReview that does not
    // answer); meanwhile every reader answers at once.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!offer.is_finished(), "the approval is held");
    let read = tokio::time::timeout(Duration::from_millis(100), async {
        (
            m.running().await.len(),
            m.primaries().await.len(),
            m.slots().await.len(),
            m.origin_of("chaospod").await,
        )
    })
    .await
    .expect("readers answer while an offer waits for its approval");
    assert_eq!(read, (1, 1, 1, Some(file("c"))));
    hold.notify_one();
    let accepted = offer.await.unwrap().unwrap();
    assert_eq!(accepted.change, Change::Started);
    assert_eq!(m.running().await.len(), 2);
}

#[tokio::test]
async fn a_candidate_is_the_same_plugin_watching_the_same_way() {
    let fake = Fake::new();
    let (m, _stop) = manager(&fake);
    let shadow = || Mode::Shadow;
    assert_eq!(
        reason(
            m.offer_candidate(
                &upload("p"),
                component("podreplica_v2.wasm"),
                shadow(),
                Policy::default()
            )
            .await
        ),
        Reason::NoActiveVersion
    );
    m.offer(&upload("p"), component("podreplica.wasm"))
        .await
        .unwrap();
    assert_eq!(
        reason(
            m.offer_candidate(
                &upload("p"),
                component("podreplica_renamed.wasm"),
                shadow(),
                Policy::default()
            )
            .await
        ),
        Reason::CandidateNameDiffers
    );
    assert_eq!(
        reason(
            m.offer_candidate(
                &upload("p"),
                component("podreplica_v3.wasm"),
                shadow(),
                Policy::default()
            )
            .await
        ),
        Reason::CandidateWatchesDifferently
    );
    let c = m
        .offer_candidate(
            &upload("p"),
            component("podreplica_v2.wasm"),
            shadow(),
            Policy::default(),
        )
        .await
        .unwrap();
    assert_eq!(c.change, Change::Started);
    assert_eq!(m.rollouts().await.len(), 1);
    m.drop_candidate(&upload("p")).await;
    assert!(m.rollouts().await.is_empty());
}

#[tokio::test]
async fn the_running_version_decides_until_the_new_ones_caches_are_listed() {
    let fake = Fake::new();
    let (m, _stop) = manager(&fake);
    let m = Arc::new(m.with_list_timeout(Duration::from_secs(30)));
    m.offer(&file("p"), component("podreplica.wasm"))
        .await
        .unwrap();
    let slow = Arc::new(Notify::new());
    *fake.unlisted.lock().unwrap() = Some(slow.clone());
    let offer = tokio::spawn({
        let m = m.clone();
        async move { m.offer(&file("p"), component("podreplica_v3.wasm")).await }
    });
    // While the new version's caches list, the old controller runs and the old version
    // decides.
    while fake.log().len() < 3 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        fake.log(),
        [
            "prepare podreplica",
            "start podreplica",
            "prepare podreplica"
        ]
    );
    let running = m.slots().await;
    assert_eq!(running[0].1.current().info.version, "0.1.0");
    assert!(!offer.is_finished());
    // Listed: only now the old controller stops and the new one starts.
    slow.notify_one();
    assert_eq!(offer.await.unwrap().unwrap().change, Change::Restarted);
    assert_eq!(fake.log(), RESTARTED);
}

#[tokio::test]
async fn a_version_whose_caches_do_not_list_in_time_is_refused_and_the_old_one_stays() {
    let fake = Fake::new();
    let (m, _stop) = manager(&fake);
    let limit = Duration::from_millis(300);
    let m = m.with_list_timeout(limit);
    m.offer(&file("p"), component("podreplica.wasm"))
        .await
        .unwrap();
    *fake.unlisted.lock().unwrap() = Some(Arc::new(Notify::new()));
    let asked = std::time::Instant::now();
    let refused = m
        .offer(&file("p"), component("podreplica_v3.wasm"))
        .await
        .unwrap_err();
    let took = asked.elapsed();
    assert_eq!(refused.reason, Reason::CachesNotListed);
    assert!(refused.retries(), "its source offers it again");
    assert!(
        refused.message.contains("0.1.0 keeps deciding"),
        "{}",
        refused.message
    );
    // Refused when the limit ran out, not before (the upper bound is the test's own
    // deadline: the offer returned at all).
    assert!(
        took >= limit,
        "refused after {took:?}, the limit is {limit:?}"
    );
    // The old controller was never stopped, and it still runs the old version.
    assert_eq!(
        fake.log(),
        [
            "prepare podreplica",
            "start podreplica",
            "prepare podreplica"
        ]
    );
    assert_eq!(m.slots().await[0].1.current().info.version, "0.1.0");
    // Once the caches list, the same version is accepted.
    *fake.unlisted.lock().unwrap() = None;
    let v3 = m
        .offer(&file("p"), component("podreplica_v3.wasm"))
        .await
        .unwrap();
    assert_eq!(v3.change, Change::Restarted);
}
