//! Kubernetes label selectors in their string form (`app=web,tier!=db,env in (a,b),!x`).

use std::collections::BTreeMap;

/// One requirement of a selector.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

/// Splits on commas that are not inside parentheses.
fn split_top_level(text: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

fn set_of(text: &str) -> Result<Vec<String>, String> {
    let inner = text
        .trim()
        .strip_prefix('(')
        .and_then(|t| t.strip_suffix(')'))
        .ok_or_else(|| format!("expected a parenthesised set, got `{text}`"))?;
    Ok(inner.split(',').map(|v| v.trim().to_string()).collect())
}

/// Whether `s` is a label name as the API server allows one: at most 63 characters,
/// alphanumerics with `-`, `_` or `.` between them (also a value, which may be empty).
fn is_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// Whether `s` is a DNS subdomain (a label key's prefix): at most 253 characters, dot
/// separated lowercase alphanumerics and `-`.
fn is_subdomain(s: &str) -> bool {
    s.len() <= 253
        && s.split('.').all(|part| {
            let b = part.as_bytes();
            !b.is_empty()
                && b.len() <= 63
                && b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        })
}

/// Checks a label key (`[prefix/]name`) as the API server does.
fn check_key(key: &str) -> Result<(), String> {
    let ok = match key.split_once('/') {
        Some((prefix, name)) => is_subdomain(prefix) && is_name(name),
        None => is_name(key),
    };
    ok.then_some(())
        .ok_or_else(|| format!("`{key}` is not a valid label key"))
}

/// Checks a label value as the API server does (empty, or a name).
fn check_value(value: &str) -> Result<(), String> {
    (value.is_empty() || is_name(value))
        .then_some(())
        .ok_or_else(|| format!("`{value}` is not a valid label value"))
}

impl Requirement {
    /// Checks its key and values as the API server would.
    fn check(&self) -> Result<(), String> {
        let (key, values): (&str, Vec<&String>) = match self {
            Requirement::Equals(k, v) | Requirement::NotEquals(k, v) => (k, vec![v]),
            Requirement::In(k, vs) | Requirement::NotIn(k, vs) => (k, vs.iter().collect()),
            Requirement::Exists(k) | Requirement::NotExists(k) => (k, vec![]),
        };
        check_key(key)?;
        values.into_iter().try_for_each(|v| check_value(v))
    }
}

impl LabelSelector {
    /// Parses the string form, each key and value checked as the API server checks them
    /// (a selector it would refuse is refused here). An error names the requirement.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut requirements = Vec::new();
        for part in split_top_level(text).into_iter().map(str::trim) {
            if part.is_empty() {
                continue;
            }
            let req = if let Some(k) = part.strip_prefix('!') {
                Requirement::NotExists(k.trim().to_string())
            } else if let Some((k, v)) = part.split_once("!=") {
                Requirement::NotEquals(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
                Requirement::Equals(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = part.split_once(" notin ") {
                Requirement::NotIn(k.trim().into(), set_of(v)?)
            } else if let Some((k, v)) = part.split_once(" in ") {
                Requirement::In(k.trim().into(), set_of(v)?)
            } else if part
                .chars()
                .all(|c| c.is_alphanumeric() || "-_./".contains(c))
            {
                Requirement::Exists(part.to_string())
            } else {
                return Err(format!("cannot parse label requirement `{part}`"));
            };
            req.check()
                .map_err(|e| format!("label requirement `{part}`: {e}"))?;
            requirements.push(req);
        }
        Ok(LabelSelector { requirements })
    }

    /// Whether `labels` satisfy every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| match r {
            Requirement::Equals(k, v) => labels.get(k) == Some(v),
            Requirement::NotEquals(k, v) => labels.get(k) != Some(v),
            Requirement::In(k, vs) => labels.get(k).is_some_and(|l| vs.contains(l)),
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|l| !vs.contains(l)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::NotExists(k) => !labels.contains_key(k),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn equality_set_and_existence_requirements() {
        let s =
            LabelSelector::parse("app=web, tier!=db, env in (prod, stage), !legacy, team").unwrap();
        assert!(s.matches(&labels(&[("app", "web"), ("env", "prod"), ("team", "a")])));
        assert!(!s.matches(&labels(&[("app", "web"), ("env", "dev"), ("team", "a")])));
        assert!(!s.matches(&labels(&[("app", "web"), ("env", "prod")])));
        assert!(!s.matches(&labels(&[
            ("app", "web"),
            ("env", "prod"),
            ("team", "a"),
            ("legacy", "1")
        ])));
        assert!(!s.matches(&labels(&[
            ("app", "web"),
            ("tier", "db"),
            ("env", "prod"),
            ("team", "a")
        ])));
        let n = LabelSelector::parse("env notin (prod)").unwrap();
        assert!(n.matches(&labels(&[])));
        assert!(!n.matches(&labels(&[("env", "prod")])));
        assert!(LabelSelector::parse("").unwrap().matches(&labels(&[])));
        assert!(LabelSelector::parse("a in b").is_err());
    }

    #[test]
    fn keys_and_values_the_api_server_refuses_are_refused() {
        for bad in [
            "app=a b",
            "app=-x",
            "a b=x",
            "Example.com/app=x",
            "app in (x, y z)",
            &format!("app={}", "v".repeat(64)),
            "/app=x",
        ] {
            let err = LabelSelector::parse(bad).unwrap_err();
            assert!(err.contains("not a valid label"), "{bad}: {err}");
        }
        for good in [
            "app.kubernetes.io/name=web",
            "wasmop.dev/shard=0",
            "app=",
            "a_b.c-d=E_f.9",
            "!example.com/legacy",
        ] {
            LabelSelector::parse(good).unwrap_or_else(|e| panic!("{good}: {e}"));
        }
    }
}
