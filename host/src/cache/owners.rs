//! An index of a relation's cache by controlling owner UID, kept by the watch stream after
//! the reflector (beside [`crate::reconcile::own_writes::tap`]): a primary's decision reads only the objects it
//! controls, not every object of the kind. A relist (`Init` … `InitDone`) rebuilds the
//! index beside the old one and swaps it in whole, as the reflector does with its store.
//!
//! The cache stays the truth: a name the index lists but the cache no longer holds is
//! skipped by the reader; an object the cache holds a moment before the index lists it is
//! seen by the next reconcile, which its own watch event triggers after the index is
//! updated.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use kube::api::DynamicObject;
use kube::runtime::watcher;

/// (namespace, name) of an indexed object.
pub type NameKey = (Option<String>, String);

#[derive(Default)]
struct Maps {
    by_owner: HashMap<String, HashSet<NameKey>>,
    owner_of: HashMap<NameKey, String>,
}

impl Maps {
    fn put(&mut self, obj: &DynamicObject) {
        let key = name_key(obj);
        self.remove(&key);
        if let Some(owner) = controller_uid(obj) {
            self.by_owner
                .entry(owner.clone())
                .or_default()
                .insert(key.clone());
            self.owner_of.insert(key, owner);
        }
    }

    fn remove(&mut self, key: &NameKey) {
        if let Some(old) = self.owner_of.remove(key)
            && let Some(set) = self.by_owner.get_mut(&old)
        {
            set.remove(key);
            if set.is_empty() {
                self.by_owner.remove(&old);
            }
        }
    }
}

/// The index of one cache by controller owner UID.
#[derive(Default)]
pub struct OwnerIndex {
    live: Mutex<Maps>,
    building: Mutex<Option<Maps>>,
}

fn name_key(obj: &DynamicObject) -> NameKey {
    (
        obj.metadata.namespace.clone(),
        obj.metadata.name.clone().unwrap_or_default(),
    )
}

/// The UID of the object's controlling owner, if any.
pub fn controller_uid(obj: &DynamicObject) -> Option<String> {
    obj.metadata
        .owner_references
        .as_deref()?
        .iter()
        .find(|r| r.controller == Some(true))
        .map(|r| r.uid.clone())
}

impl OwnerIndex {
    /// A new, empty index.
    pub fn new() -> Arc<OwnerIndex> {
        Arc::default()
    }

    /// Applies one watch event.
    pub fn apply(&self, event: &watcher::Event<DynamicObject>) {
        match event {
            watcher::Event::Init => *self.lock_building() = Some(Maps::default()),
            watcher::Event::InitApply(o) => {
                if let Some(b) = self.lock_building().as_mut() {
                    b.put(o);
                }
            }
            watcher::Event::InitDone => {
                if let Some(b) = self.lock_building().take() {
                    *self.lock_live() = b;
                }
            }
            watcher::Event::Apply(o) => self.lock_live().put(o),
            watcher::Event::Delete(o) => self.lock_live().remove(&name_key(o)),
        }
    }

    /// The objects controlled by `owner_uid`.
    pub fn controlled_by(&self, owner_uid: &str) -> Vec<NameKey> {
        self.lock_live()
            .by_owner
            .get(owner_uid)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Whether the index shows `obj` as the cache holds it: listed under its controlling
    /// owner, or not listed at all when it has none. The cache is updated a moment before
    /// the index; until then a reader of the index would miss the object.
    pub fn shows(&self, obj: &DynamicObject) -> bool {
        let live = self.lock_live();
        let key = name_key(obj);
        live.owner_of.get(&key) == controller_uid(obj).as_ref()
    }

    fn lock_live(&self) -> std::sync::MutexGuard<'_, Maps> {
        self.live.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lock_building(&self) -> std::sync::MutexGuard<'_, Option<Maps>> {
        self.building.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, owner: Option<&str>) -> DynamicObject {
        let mut v = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"}});
        if let Some(uid) = owner {
            v["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "X",
                "name": "x", "uid": uid, "controller": true}]);
        }
        serde_json::from_value(v).unwrap()
    }

    fn names(index: &OwnerIndex, owner: &str) -> Vec<String> {
        let mut n: Vec<String> = index
            .controlled_by(owner)
            .into_iter()
            .map(|k| k.1)
            .collect();
        n.sort();
        n
    }

    #[test]
    fn follows_applies_deletes_and_owner_changes() {
        let index = OwnerIndex::new();
        index.apply(&watcher::Event::Apply(pod("a", Some("U"))));
        index.apply(&watcher::Event::Apply(pod("b", Some("U"))));
        index.apply(&watcher::Event::Apply(pod("c", None)));
        assert_eq!(names(&index, "U"), ["a", "b"]);
        index.apply(&watcher::Event::Apply(pod("b", Some("V"))));
        assert_eq!(names(&index, "U"), ["a"]);
        assert_eq!(names(&index, "V"), ["b"]);
        index.apply(&watcher::Event::Delete(pod("a", Some("U"))));
        assert!(names(&index, "U").is_empty());
    }

    #[test]
    fn shows_an_object_only_once_it_is_listed_under_its_owner() {
        let index = OwnerIndex::new();
        assert!(!index.shows(&pod("a", Some("U"))));
        assert!(index.shows(&pod("c", None)));
        index.apply(&watcher::Event::Apply(pod("a", Some("U"))));
        assert!(index.shows(&pod("a", Some("U"))));
        assert!(!index.shows(&pod("a", Some("V"))));
    }

    #[test]
    fn a_relist_replaces_the_index_whole_when_done() {
        let index = OwnerIndex::new();
        index.apply(&watcher::Event::Apply(pod("old", Some("U"))));
        index.apply(&watcher::Event::Init);
        index.apply(&watcher::Event::InitApply(pod("new", Some("U"))));
        // Until the relist is done, readers see the old index.
        assert_eq!(names(&index, "U"), ["old"]);
        index.apply(&watcher::Event::InitDone);
        assert_eq!(names(&index, "U"), ["new"]);
    }

    #[test]
    fn thousands_of_owners_each_find_only_their_own() {
        let index = OwnerIndex::new();
        for i in 0..3000 {
            index.apply(&watcher::Event::Apply(pod(
                &format!("p{i}"),
                Some(&format!("U{}", i % 1000)),
            )));
        }
        for o in 0..1000 {
            let n = names(&index, &format!("U{o}"));
            assert_eq!(n.len(), 3);
        }
    }
}
