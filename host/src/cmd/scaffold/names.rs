//! What `wasmop new` accepts as a plugin name, a kind, a group and a version, with a message
//! that says what is wrong and what would do.

/// Names Rust or cargo reserve: a crate cannot be called so.
const RESERVED: &[&str] = &[
    "test",
    "core",
    "std",
    "alloc",
    "proc-macro",
    "self",
    "super",
    "crate",
];

/// A plugin name: a DNS label (it names the WasmPlugin and the ConfigMap of an upload) that
/// is also a crate name: lowercase letters, digits and '-', starting with a letter.
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && !name.ends_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !ok {
        return Err(format!(
            "`{name}` is not a valid plugin name: lowercase letters, digits and '-', starting with a letter, not ending with '-', at most 63 (for example `podreplica`)"
        ));
    }
    if RESERVED.contains(&name) {
        return Err(format!(
            "`{name}` is reserved by Rust and cannot name a crate: choose another name"
        ));
    }
    Ok(())
}

/// A kind: UpperCamelCase letters and digits, starting with an uppercase letter.
pub fn check_kind(kind: &str) -> Result<(), String> {
    let ok = kind.starts_with(|c: char| c.is_ascii_uppercase())
        && kind.len() <= 63
        && kind.chars().all(|c| c.is_ascii_alphanumeric());
    if ok {
        Ok(())
    } else {
        Err(format!(
            "`{kind}` is not a valid kind: UpperCamelCase letters and digits, starting with an uppercase letter (for example `PodReplica`)"
        ))
    }
}

/// An API group of a custom resource: a DNS subdomain with at least one dot.
pub fn check_group(group: &str) -> Result<(), String> {
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.starts_with(|c: char| c.is_ascii_alphanumeric())
            && l.ends_with(|c: char| c.is_ascii_alphanumeric())
            && l.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    };
    if group.len() <= 253 && group.contains('.') && group.split('.').all(label_ok) {
        Ok(())
    } else {
        Err(format!(
            "`{group}` is not a valid API group: a lowercase DNS name with at least one dot (for example `example.com`)"
        ))
    }
}

/// An API version: `v1`, `v1alpha1`, `v2beta3`...
pub fn check_version(version: &str) -> Result<(), String> {
    let bad = || {
        format!(
            "`{version}` is not a valid API version: v<N>, v<N>alpha<M> or v<N>beta<M> (for example `v1alpha1`)"
        )
    };
    let rest = version.strip_prefix('v').ok_or_else(bad)?;
    let digits =
        |s: &str| !s.is_empty() && !s.starts_with('0') && s.chars().all(|c| c.is_ascii_digit());
    let ok = match rest.find(|c: char| !c.is_ascii_digit()) {
        None => digits(rest),
        Some(i) => {
            let (major, tail) = rest.split_at(i);
            let minor = tail
                .strip_prefix("alpha")
                .or_else(|| tail.strip_prefix("beta"));
            digits(major) && minor.is_some_and(digits)
        }
    };
    if ok { Ok(()) } else { Err(bad()) }
}

/// The plural resource name of `kind`: lowercase, with the English plural ending.
pub fn plural_of(kind: &str) -> String {
    let lower = kind.to_ascii_lowercase();
    if lower.ends_with('s')
        || lower.ends_with('x')
        || lower.ends_with("ch")
        || lower.ends_with("sh")
    {
        format!("{lower}es")
    } else if lower.ends_with('y')
        && !lower.ends_with("ay")
        && !lower.ends_with("ey")
        && !lower.ends_with("oy")
    {
        format!("{}ies", &lower[..lower.len() - 1])
    } else {
        format!("{lower}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_dns_labels_and_crate_names() {
        for ok in ["podreplica", "my-op", "a1"] {
            assert!(check_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "My", "1op", "op-", "op_x", "test", &"a".repeat(64)] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn kinds_groups_and_versions() {
        assert!(check_kind("PodReplica").is_ok());
        for bad in ["podReplica", "Pod-Replica", "", "Pod Replica"] {
            assert!(check_kind(bad).is_err(), "{bad}");
        }
        assert!(check_group("example.com").is_ok());
        assert!(check_group("app.example.com").is_ok());
        for bad in ["example", "Example.com", "-a.com", "a..com", "a.com-"] {
            assert!(check_group(bad).is_err(), "{bad}");
        }
        for ok in ["v1", "v1alpha1", "v2beta3", "v10"] {
            assert!(check_version(ok).is_ok(), "{ok}");
        }
        for bad in ["1", "v0", "v1alpha", "v1gamma1", "v01", "V1", "v1alpha0"] {
            assert!(check_version(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn plurals() {
        assert_eq!(plural_of("PodReplica"), "podreplicas");
        assert_eq!(plural_of("Policy"), "policies");
        assert_eq!(plural_of("Gateway"), "gateways");
        assert_eq!(plural_of("Ingress"), "ingresses");
        assert_eq!(plural_of("Box"), "boxes");
    }
}
