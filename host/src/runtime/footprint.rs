//! What a JSON text will cost the host once parsed into `serde_json::Value`, measured
//! before it is parsed, without allocating it.
//!
//! A plugin's answer is a string, limited in bytes (the output budget, [`crate::runtime::budget`]);
//! parsed, the same bytes can take many times more: `[0,0,0,…]` is 2 bytes an element as
//! text and a 32-byte `Value` (in a vector that may have grown to twice its length) once
//! parsed. So every JSON part of an answer is first walked by a deserializer that counts
//! what the parse would allocate and stops as soon as the count passes a limit, or the
//! nesting passes [`MAX_DEPTH`]; only an answer within both is parsed, and the host-wide
//! guest-memory budget is charged with the count for as long as the parsed answer lives
//! ([`crate::runtime::limits::GuestMemory::reserve`]).
//!
//! The count is an upper bound of what `serde_json` allocates for the value (checked
//! against a counting allocator in the hostile tests): a node is a `Value`, an array
//! element may cost two (the vector's growth) and an array the four of its first
//! allocation, an object with members its first map node, a member its key and a map entry
//! of twice the key and value (nodes at most half empty), a string its bytes.

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};

/// Deepest nesting of arrays and objects accepted (Kubernetes objects, CRD schemas
/// included, stay far below it).
pub const MAX_DEPTH: usize = 100;

/// Bytes counted for every value: one `serde_json::Value`.
const NODE: usize = std::mem::size_of::<serde_json::Value>();
/// Bytes counted on top for an array element: the vector may have grown to twice its length.
const ELEMENT: usize = NODE;
/// Bytes counted once for an array: a vector's first allocation holds four values.
const VEC_START: usize = 4 * NODE;
/// Bytes counted once for an object with members: a map's first node holds eleven.
const MAP_START: usize =
    11 * (std::mem::size_of::<String>() + NODE) + 4 * std::mem::size_of::<u64>();
/// Bytes counted on top for an object member: a map entry (the key's `String` and the
/// value's `Value`), twice over for the map's spare room.
const MEMBER: usize = 2 * (std::mem::size_of::<String>() + NODE + std::mem::size_of::<u64>());

/// Why a text was refused before parsing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// Parsed, it would take more than the limit (the bytes counted when the walk stopped).
    TooLarge {
        /// The limit it passed.
        limit: usize,
    },
    /// Nested deeper than [`MAX_DEPTH`].
    TooDeep,
    /// Not JSON.
    Invalid(String),
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::TooLarge { limit } => write!(
                f,
                "parsed, it would take more than {limit} bytes of host memory"
            ),
            Refused::TooDeep => write!(f, "nested deeper than {MAX_DEPTH} levels"),
            Refused::Invalid(e) => write!(f, "not JSON: {e}"),
        }
    }
}

/// The running count of one walk.
struct Tally {
    bytes: usize,
    limit: usize,
    refused: Option<Refused>,
}

impl Tally {
    fn add<E: de::Error>(&mut self, bytes: usize) -> Result<(), E> {
        self.bytes = self.bytes.saturating_add(bytes);
        if self.bytes > self.limit {
            self.refused = Some(Refused::TooLarge { limit: self.limit });
            return Err(E::custom("over the limit"));
        }
        Ok(())
    }
}

/// One value to walk, at `depth`.
struct Meter<'t> {
    tally: &'t mut Tally,
    depth: usize,
}

impl<'de> DeserializeSeed<'de> for Meter<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Meter<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        self.tally.add(NODE)
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        self.tally.add(NODE)
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        self.tally.add(NODE)
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        self.tally.add(NODE)
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<(), E> {
        self.tally.add(NODE.saturating_add(s.len()))
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.tally.add(NODE)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let depth = self.depth + 1;
        if depth > MAX_DEPTH {
            self.tally.refused = Some(Refused::TooDeep);
            return Err(de::Error::custom("too deep"));
        }
        self.tally.add(NODE + VEC_START)?;
        loop {
            self.tally.add(ELEMENT)?;
            let element = Meter {
                tally: &mut *self.tally,
                depth,
            };
            if seq.next_element_seed(element)?.is_none() {
                return Ok(());
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let depth = self.depth + 1;
        if depth > MAX_DEPTH {
            self.tally.refused = Some(Refused::TooDeep);
            return Err(de::Error::custom("too deep"));
        }
        self.tally.add(NODE)?;
        let mut first = true;
        while let Some(key) = map.next_key::<Key>()? {
            if std::mem::take(&mut first) {
                self.tally.add(MAP_START)?;
            }
            self.tally.add(MEMBER.saturating_add(key.0))?;
            map.next_value_seed(Meter {
                tally: &mut *self.tally,
                depth,
            })?;
        }
        Ok(())
    }
}

/// An object's key: only its length is kept.
struct Key(usize);

impl<'de> de::Deserialize<'de> for Key {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Len;
        impl Visitor<'_> for Len {
            type Value = Key;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Key, E> {
                Ok(Key(s.len()))
            }
        }
        d.deserialize_str(Len)
    }
}

/// The bytes `text` takes parsed into a `serde_json::Value`, counted without parsing it;
/// refused as soon as the count passes `limit` or the nesting [`MAX_DEPTH`].
pub fn of_json(text: &str, limit: usize) -> Result<usize, Refused> {
    let mut tally = Tally {
        bytes: 0,
        limit,
        refused: None,
    };
    let mut de = serde_json::Deserializer::from_str(text);
    // The walk's own nesting is bounded by MAX_DEPTH, below serde_json's recursion limit.
    let walked = Meter {
        tally: &mut tally,
        depth: 0,
    }
    .deserialize(&mut de)
    .and_then(|()| de.end());
    match (walked, tally.refused) {
        (_, Some(refused)) => Err(refused),
        (Err(e), None) => Err(Refused::Invalid(e.to_string())),
        (Ok(()), None) => Ok(tally.bytes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_nodes_members_and_strings() {
        assert_eq!(of_json("0", 1 << 20), Ok(NODE));
        assert_eq!(of_json("\"abc\"", 1 << 20), Ok(NODE + 3));
        assert_eq!(of_json("[]", 1 << 20), Ok(NODE + VEC_START + ELEMENT));
        assert_eq!(
            of_json("[1,2]", 1 << 20),
            Ok(NODE + VEC_START + 3 * ELEMENT + 2 * NODE)
        );
        assert_eq!(
            of_json("{\"ab\":null}", 1 << 20),
            Ok(2 * NODE + MAP_START + MEMBER + 2)
        );
        assert_eq!(of_json("{}", 1 << 20), Ok(NODE));
    }

    #[test]
    fn an_answer_that_parses_big_is_refused_early() {
        // 8 MB of text, about 4 million elements: far over 64 MiB parsed.
        let text = format!("[{}0]", "0,".repeat(4_000_000));
        assert_eq!(
            of_json(&text, 64 << 20),
            Err(Refused::TooLarge { limit: 64 << 20 })
        );
        // The same text as one string costs its bytes.
        let string = format!("\"{}\"", "0".repeat(8_000_000));
        assert_eq!(of_json(&string, 64 << 20), Ok(NODE + 8_000_000));
    }

    #[test]
    fn nesting_and_invalid_text_are_refused() {
        let deep = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        assert_eq!(of_json(&deep, usize::MAX), Err(Refused::TooDeep));
        let fine = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert!(of_json(&fine, usize::MAX).is_ok());
        assert!(matches!(of_json("{", 1 << 20), Err(Refused::Invalid(_))));
        assert!(matches!(of_json("1 2", 1 << 20), Err(Refused::Invalid(_))));
    }
}
