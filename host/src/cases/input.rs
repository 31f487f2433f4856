//! Reading Kubernetes YAML files (several documents per file) with errors that name the
//! file and what is wrong.

use std::path::Path;

use serde_json::Value;

/// An input file that could not be used.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// The file could not be read.
    #[error("{path}: cannot read: {source}")]
    Read {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The file is not YAML.
    #[error("{path}: document {index} is not valid YAML: {message}")]
    Yaml {
        /// The file.
        path: String,
        /// 1-based document number.
        index: usize,
        /// Parser message (with line and column).
        message: String,
    },
    /// A document is not a Kubernetes object.
    #[error("{path}: document {index} is not a Kubernetes object: {message}")]
    NotAnObject {
        /// The file.
        path: String,
        /// 1-based document number.
        index: usize,
        /// What is missing.
        message: String,
    },
    /// The wrong number of objects.
    #[error("{path}: {message}")]
    Count {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
}

/// Renders any serialisable value as YAML by way of JSON, so that enums nest the way they
/// do in JSON (`{apply: {...}}`) rather than as YAML tags.
pub fn to_yaml(value: &impl serde::Serialize) -> anyhow::Result<String> {
    Ok(serde_yaml::to_string(&serde_json::to_value(value)?)?)
}

/// Parses YAML into any deserialisable value by way of JSON (the inverse of [`to_yaml`]).
pub fn from_yaml<T: serde::de::DeserializeOwned>(text: &str) -> anyhow::Result<T> {
    let v: Value = serde_yaml::from_str(text)?;
    Ok(serde_json::from_value(v)?)
}

/// Fills what an object written by hand usually lacks but the API server would set:
/// the namespace (`default`, for namespaced kinds) and a UID derived from the name, so
/// owner references can be made. Says on stderr what it filled in.
pub fn complete_object(object: &mut Value, namespaced: bool) {
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if namespaced && object.pointer("/metadata/namespace").is_none() {
        object["metadata"]["namespace"] = "default".into();
    }
    if object.pointer("/metadata/uid").is_none() {
        let uid = format!("offline-uid-{name}");
        eprintln!("note: {name} has no metadata.uid; using `{uid}`");
        object["metadata"]["uid"] = uid.into();
    }
    if object.pointer("/metadata/generation").is_none() {
        object["metadata"]["generation"] = 1.into();
    }
}

/// Checks the fields every object needs: apiVersion, kind, metadata.name.
pub fn check_object(v: &Value) -> Result<(), String> {
    for (pointer, what) in [
        ("/apiVersion", "apiVersion"),
        ("/kind", "kind"),
        ("/metadata/name", "metadata.name"),
    ] {
        if v.pointer(pointer)
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            return Err(format!("missing {what}"));
        }
    }
    Ok(())
}

/// Parses every non-empty YAML document of `text` (a `List` kind is expanded).
pub fn parse_objects(path: &str, text: &str) -> Result<Vec<Value>, InputError> {
    let mut out = Vec::new();
    for (i, doc) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let index = i + 1;
        let v: Value = serde::Deserialize::deserialize(doc).map_err(|e| InputError::Yaml {
            path: path.to_string(),
            index,
            message: e.to_string(),
        })?;
        if v.is_null() {
            continue;
        }
        let items = match v.get("items").and_then(Value::as_array) {
            Some(items)
                if v.get("kind")
                    .and_then(Value::as_str)
                    .is_some_and(|k| k.ends_with("List")) =>
            {
                items.clone()
            }
            _ => vec![v],
        };
        for item in items {
            check_object(&item).map_err(|message| InputError::NotAnObject {
                path: path.to_string(),
                index,
                message,
            })?;
            out.push(item);
        }
    }
    Ok(out)
}

/// Reads every object of a YAML file.
pub fn read_objects(path: &Path) -> Result<Vec<Value>, InputError> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| InputError::Read {
        path: name.clone(),
        source,
    })?;
    parse_objects(&name, &text)
}

/// Reads a file that must hold exactly one object.
pub fn read_one(path: &Path) -> Result<Value, InputError> {
    let mut objs = read_objects(path)?;
    if objs.len() != 1 {
        return Err(InputError::Count {
            path: path.display().to_string(),
            message: format!("expected exactly one object, found {}", objs.len()),
        });
    }
    Ok(objs.remove(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_several_documents_and_lists() {
        let text = "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n---\n---\n\
                    apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Pod, metadata: {name: b}}\n";
        let objs = parse_objects("f.yaml", text).unwrap();
        assert_eq!(objs.len(), 2);
        assert_eq!(objs[1]["metadata"]["name"], "b");
    }

    #[test]
    fn errors_name_the_file_document_and_problem() {
        let e = parse_objects("f.yaml", "a: [1,\n").unwrap_err().to_string();
        assert!(e.starts_with("f.yaml: document 1 is not valid YAML"), "{e}");
        let e = parse_objects("g.yaml", "kind: Pod\nmetadata: {name: a}\n")
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "g.yaml: document 1 is not a Kubernetes object: missing apiVersion"
        );
        let e = read_one(Path::new("/nonexistent/x.yaml"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("/nonexistent/x.yaml: cannot read"), "{e}");
    }
}
