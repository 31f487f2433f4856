use std::sync::Arc;

use kube::api::{DynamicObject, ObjectMeta};

use super::*;

fn key(name: &str) -> ObjectKey {
    ObjectKey {
        group: String::new(),
        kind: "Pod".into(),
        namespace: Some("ns".into()),
        name: name.into(),
    }
}

fn obj(name: &str, uid: &str, rv: &str) -> DynamicObject {
    DynamicObject {
        types: None,
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            uid: Some(uid.into()),
            resource_version: Some(rv.into()),
            ..Default::default()
        },
        data: serde_json::Value::Null,
    }
}

fn written(rv: &str) -> Expect {
    Expect::Written {
        resource_version: rv.into(),
    }
}

fn waiting(e: &Expectations, primary: &str) -> usize {
    match e.pending(primary) {
        Pending::Waiting { outstanding, .. } => outstanding,
        other => panic!("expected waiting, got {other:?}"),
    }
}

#[test]
fn a_create_is_awaited_until_the_watch_shows_it_at_that_version() {
    let e = Expectations::new(Duration::from_secs(30));
    e.expect("p", key("a"), written("105"), || None);
    assert_eq!(waiting(&e, "p"), 1);
    // An older event of the object (in flight before the write) does not count.
    e.observe(&key("a"), Seen::Present(&obj("a", "u1", "99")));
    assert_eq!(waiting(&e, "p"), 1);
    // Another object does not count.
    e.observe(&key("b"), Seen::Present(&obj("b", "u2", "200")));
    assert_eq!(waiting(&e, "p"), 1);
    e.observe(&key("a"), Seen::Present(&obj("a", "u1", "105")));
    assert_eq!(e.pending("p"), Pending::Clear);
    assert_eq!(e.outstanding(), 0);
}

#[test]
fn what_the_cache_already_shows_is_not_awaited() {
    let e = Expectations::new(Duration::from_secs(30));
    let cached = Arc::new(obj("a", "u1", "110"));
    e.expect("p", key("a"), written("105"), || Some(cached.clone()));
    e.expect(
        "p",
        key("gone"),
        Expect::Deleted { uid: "u9".into() },
        || None,
    );
    assert_eq!(e.pending("p"), Pending::Clear);
}

#[test]
fn deletes_are_seen_as_gone_terminating_or_replaced() {
    let e = Expectations::new(Duration::from_secs(30));
    let deleted = |uid: &str| Expect::Deleted { uid: uid.into() };
    let present = Arc::new(obj("a", "u1", "5"));
    e.expect("p", key("a"), deleted("u1"), || Some(present.clone()));
    e.expect("p", key("b"), deleted("u2"), || {
        Some(Arc::new(obj("b", "u2", "6")))
    });
    e.expect("p", key("c"), deleted("u3"), || {
        Some(Arc::new(obj("c", "u3", "7")))
    });
    assert_eq!(waiting(&e, "p"), 3);
    e.observe(&key("a"), Seen::Gone);
    let mut terminating = obj("b", "u2", "9");
    terminating.metadata.deletion_timestamp = Some(
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::now()),
    );
    e.observe(&key("b"), Seen::Present(&terminating));
    assert_eq!(waiting(&e, "p"), 1);
    // A new object under the same name is not the deleted one.
    e.observe(&key("c"), Seen::Present(&obj("c", "u-new", "10")));
    assert_eq!(e.pending("p"), Pending::Clear);
}

#[test]
fn a_created_object_deleted_before_it_was_seen_still_counts() {
    let e = Expectations::new(Duration::from_secs(30));
    e.expect("p", key("a"), written("105"), || None);
    e.observe(&key("a"), Seen::Gone);
    assert_eq!(e.pending("p"), Pending::Clear);
}

#[test]
fn primaries_wait_independently_and_forget_drops_one() {
    let e = Expectations::new(Duration::from_secs(30));
    e.expect("p1", key("a"), written("5"), || None);
    e.expect("p2", key("a"), written("7"), || None);
    e.expect("p2", key("b"), written("7"), || None);
    e.observe(&key("a"), Seen::Present(&obj("a", "u", "6")));
    assert_eq!(e.pending("p1"), Pending::Clear);
    assert_eq!(waiting(&e, "p2"), 2);
    e.forget("p2");
    assert_eq!(e.pending("p2"), Pending::Clear);
    assert_eq!(e.outstanding(), 0);
}

#[test]
fn unseen_expectations_expire_and_are_dropped() {
    let e = Expectations::new(Duration::from_millis(30));
    e.expect("p", key("a"), written("5"), || None);
    match e.pending("p") {
        Pending::Waiting { expires_in, .. } => assert!(expires_in <= Duration::from_millis(30)),
        other => panic!("{other:?}"),
    }
    std::thread::sleep(Duration::from_millis(40));
    assert_eq!(e.pending("p"), Pending::Expired { outstanding: 1 });
    assert_eq!(e.pending("p"), Pending::Clear);
    // The object index is clean too: a late event finds nothing.
    e.observe(&key("a"), Seen::Present(&obj("a", "u", "9")));
    assert_eq!(e.outstanding(), 0);
}

#[test]
fn non_numeric_versions_count_any_event_after_the_write() {
    let e = Expectations::new(Duration::from_secs(30));
    e.expect("p", key("a"), written("abc"), || None);
    e.observe(&key("a"), Seen::Present(&obj("a", "u", "xyz")));
    assert_eq!(e.pending("p"), Pending::Clear);
}

#[test]
fn thousands_of_primaries_settle_in_any_order() {
    let e = Expectations::new(Duration::from_secs(30));
    for p in 0..3000 {
        for i in 0..3 {
            e.expect(
                &format!("p{p}"),
                key(&format!("pod-{p}-{i}")),
                written("10"),
                || None,
            );
        }
    }
    assert_eq!(e.outstanding(), 9000);
    // Events arrive interleaved across primaries, in reverse.
    for i in (0..3).rev() {
        for p in (0..3000).rev() {
            let name = format!("pod-{p}-{i}");
            e.observe(&key(&name), Seen::Present(&obj(&name, "u", "11")));
        }
        if i > 0 {
            assert_eq!(waiting(&e, "p1234"), i);
        }
    }
    assert_eq!(e.outstanding(), 0);
    assert_eq!(e.pending("p0"), Pending::Clear);
}

#[test]
fn a_relist_settles_deletes_by_absence_but_writes_only_by_the_version() {
    let e = Expectations::new(Duration::from_secs(30));
    e.expect("p", key("created"), written("50"), || None);
    e.expect("p", key("listed"), written("60"), || None);
    e.expect(
        "p",
        key("deleted"),
        Expect::Deleted { uid: "u3".into() },
        || Some(Arc::new(obj("deleted", "u3", "40"))),
    );
    assert_eq!(waiting(&e, "p"), 3);
    // The new cache holds "listed" at its version, not "created" (the list may predate
    // the write) nor "deleted" (gone while the watch was down: no Delete event comes).
    let cache = |k: &ObjectKey| (k.name == "listed").then(|| Arc::new(obj("listed", "u2", "61")));
    e.relisted("", "Pod", cache);
    assert_eq!(waiting(&e, "p"), 1);
    // Another kind's relist settles nothing of this kind.
    e.relisted("", "ConfigMap", |_| None);
    assert_eq!(waiting(&e, "p"), 1);
    e.observe(&key("created"), Seen::Present(&obj("created", "u1", "50")));
    assert_eq!(e.pending("p"), Pending::Clear);
}

#[test]
fn a_primary_waits_until_its_last_write_is_seen_or_expired() {
    let e = Expectations::new(Duration::from_millis(50));
    assert!(!e.waits("p"));
    e.expect("p", key("a"), written("10"), || None);
    e.expect("p", key("b"), written("11"), || None);
    assert!(e.waits("p"));
    e.observe(&key("a"), Seen::Present(&obj("a", "u1", "10")));
    assert!(e.waits("p"), "one of two writes seen");
    e.observe(&key("b"), Seen::Present(&obj("b", "u2", "11")));
    assert!(!e.waits("p"));
    // Expired expectations no longer hold a primary back.
    e.expect("q", key("c"), written("12"), || None);
    assert!(e.waits("q"));
    std::thread::sleep(Duration::from_millis(60));
    assert!(!e.waits("q"));
}

#[test]
fn only_the_event_at_the_written_version_is_an_echo() {
    let e = Expectations::new(Duration::from_secs(30));
    e.expect("p", key("p"), written("20"), || None);
    // An older event (in flight before the write) is no echo and settles nothing.
    assert!(!e.observe_echo(&key("p"), &obj("p", "u", "19")));
    assert!(e.waits("p"));
    // The write's own event is, and settles it.
    assert!(e.observe_echo(&key("p"), &obj("p", "u", "20")));
    assert!(!e.waits("p"));
    // Seen again (a relist, say): nothing is expected any more, no echo.
    assert!(!e.observe_echo(&key("p"), &obj("p", "u", "20")));
    // A newer version settles the expectation too, but is someone else's change.
    e.expect("p", key("p"), written("30"), || None);
    assert!(!e.observe_echo(&key("p"), &obj("p", "u", "31")));
    assert!(!e.waits("p"));
}

#[test]
fn a_create_cut_off_before_its_answer_holds_the_primary_until_it_expires() {
    let ttl = Duration::from_millis(200);
    let e = Expectations::new(ttl);
    // Its generated name is unknown: keyed by the prefix, never settled by an event.
    e.expect("p", key("pr-pod-"), Expect::Unanswered, || None);
    assert_eq!(waiting(&e, "p"), 1);
    e.observe(&key("pr-pod-"), Seen::Present(&obj("pr-pod-", "u1", "7")));
    e.observe(
        &key("pr-pod-x1"),
        Seen::Present(&obj("pr-pod-x1", "u2", "8")),
    );
    e.relisted("", "Pod", |_| Some(Arc::new(obj("pr-pod-x1", "u2", "8"))));
    assert!(e.waits("p"));
    // Only the expiry lets it be decided again.
    std::thread::sleep(ttl + Duration::from_millis(50));
    assert_eq!(e.pending("p"), Pending::Expired { outstanding: 1 });
    assert_eq!(e.pending("p"), Pending::Clear);
}
