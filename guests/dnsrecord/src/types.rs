//! The DnsRecord custom resource (`dns.example.com/v1alpha1`): one record in a zone of an
//! outside DNS API. The CRD is generated from these types.

use kube_derive::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Where the DNS API is when a record does not say.
pub const DEFAULT_ENDPOINT: &str = "https://dns.example.com";

/// A record in a zone of the DNS API at `endpoint`.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "dns.example.com",
    version = "v1alpha1",
    kind = "DnsRecord",
    namespaced,
    status = "DnsRecordStatus",
    derive = "PartialEq",
    printcolumn = r#"{"name":"Name","type":"string","jsonPath":".spec.name"}"#,
    printcolumn = r#"{"name":"Value","type":"string","jsonPath":".spec.value"}"#,
    printcolumn = r#"{"name":"Record","type":"string","jsonPath":".status.recordId"}"#,
    printcolumn = r#"{"name":"Synced","type":"boolean","jsonPath":".status.synced"}"#,
    crates(kube_core = "::kube_core")
)]
#[serde(rename_all = "camelCase")]
pub struct DnsRecordSpec {
    /// The DNS API's origin (`https://dns.example.com`); the plugin declares which it may
    /// reach and an admin grants them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// The zone.
    pub zone: String,
    /// The record's name in the zone.
    pub name: String,
    /// `A`, `AAAA`, `CNAME` or `TXT`.
    #[serde(rename = "type", default = "default_type")]
    pub record_type: String,
    /// The value.
    pub value: String,
    /// Time to live, seconds.
    #[serde(default = "default_ttl")]
    pub ttl: u32,
    /// A Secret in the record's namespace whose key `token` the host sends as
    /// `Authorization: Bearer …` (the plugin never sees it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_secret: Option<String>,
}

fn default_type() -> String {
    "A".into()
}

fn default_ttl() -> u32 {
    300
}

/// What the plugin knows of the record in the DNS API.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DnsRecordStatus {
    /// The record's id in the DNS API, once created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record_id: Option<String>,
    /// The fingerprint of the record as the DNS API last stored it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied: Option<String>,
    /// Whether the DNS API holds the record as the spec says.
    #[serde(default)]
    pub synced: bool,
    /// How many times the record was created (again after it vanished from the API).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub creations: u32,
    /// What is going on, in words.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// `Ready`: the DNS API holds the record as the spec says (the host sets it `False`
    /// with reason `RequestRefused` when it refuses a request).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<wasmop_sdk::Condition>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// A record as the DNS API takes and gives it.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// The record's name.
    pub name: String,
    /// Its type.
    #[serde(rename = "type")]
    pub record_type: String,
    /// Its value.
    pub value: String,
    /// Its time to live.
    pub ttl: u32,
}

/// A stored record, as the DNS API answers it.
#[derive(Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Stored {
    /// The id the DNS API gave it.
    pub id: String,
    /// The record.
    #[serde(flatten)]
    pub record: Record,
}

impl Record {
    /// The record a spec asks for.
    pub fn of(spec: &DnsRecordSpec) -> Self {
        Record {
            name: spec.name.clone(),
            record_type: spec.record_type.clone(),
            value: spec.value.clone(),
            ttl: spec.ttl,
        }
    }

    /// A stable fingerprint (FNV-1a, 64 bits, hex) of the record in `zone`: the same
    /// record, the same text, whatever the host or the run.
    pub fn fingerprint(&self, zone: &str) -> String {
        let text = format!(
            "{zone}\n{}\n{}\n{}\n{}",
            self.name, self.record_type, self.value, self.ttl
        );
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in text.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        format!("{h:016x}")
    }
}
