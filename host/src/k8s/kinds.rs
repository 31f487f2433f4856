//! From the contract's [`KindRef`] to kube's dynamic API handles; [`served`] resolves the
//! declared kinds through discovery when a version is offered.

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject};

use crate::runtime::KindRef;

pub(crate) mod served;

/// The kube `ApiResource` of a declared kind.
pub fn api_resource(k: &KindRef) -> ApiResource {
    ApiResource {
        group: k.group.clone(),
        version: k.version.clone(),
        api_version: k.api_version(),
        kind: k.kind.clone(),
        plural: k.plural.clone(),
    }
}

/// An API handle for a kind: namespaced to `namespace` when given and the kind is
/// namespaced, cluster-wide otherwise.
pub fn api_for(client: &Client, k: &KindRef, namespace: Option<&str>) -> Api<DynamicObject> {
    api_as(client, k, namespace)
}

/// [`api_for`], decoding the objects as `K` (a dynamic type of the host's own).
pub fn api_as<K>(client: &Client, k: &KindRef, namespace: Option<&str>) -> Api<K>
where
    K: kube::Resource<
            DynamicType = kube::api::ApiResource,
            Scope = kube::core::DynamicResourceScope,
        >,
{
    let ar = api_resource(k);
    match (k.namespaced, namespace) {
        (true, Some(ns)) => Api::namespaced_with(client.clone(), ns, &ar),
        _ => Api::all_with(client.clone(), &ar),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_and_grouped_kinds() {
        let pod = KindRef::pod();
        let ar = api_resource(&pod);
        assert_eq!(
            (ar.api_version.as_str(), ar.plural.as_str()),
            ("v1", "pods")
        );
        let pr = KindRef {
            group: "app.example.com".into(),
            version: "v1alpha1".into(),
            ..pod
        };
        assert_eq!(api_resource(&pr).api_version, "app.example.com/v1alpha1");
    }
}
