//! Which hosts a request may reach: a pattern `scheme://host[:port]` (`https://api.example.com`,
//! `https://*.example.com:8443`, `http://127.0.0.1:18080`) matches a URL of that scheme, host
//! and port (the scheme's default when the pattern has none); `*.` matches one or more labels
//! in front of the rest. A plugin declares patterns; an admin grants patterns to it
//! (`--outbound-grant PLUGIN=PATTERN`); a URL must match one of each.

pub(crate) use crate::runtime::types::OriginPattern as Pattern;

/// Whether `pattern` matches `url`'s origin.
pub(crate) fn matches(pattern: &Pattern, url: &reqwest::Url) -> bool {
    host_port(url).is_some_and(|(h, p)| pattern.matches(url.scheme(), &h, p))
}

/// Whether `pattern` names `url`'s host itself (no wildcard).
pub(crate) fn names(pattern: &Pattern, url: &reqwest::Url) -> bool {
    host_port(url).is_some_and(|(h, p)| pattern.names(url.scheme(), &h, p))
}

/// `url`'s host (lower case, IPv6 in brackets) and port (or the scheme's default).
pub(crate) fn host_port(url: &reqwest::Url) -> Option<(String, u16)> {
    let host = url.host_str()?.to_ascii_lowercase();
    Some((host, url.port_or_known_default()?))
}

/// Parses `PLUGIN=PATTERN` (a flag's value).
pub(crate) fn parse_grant(text: &str) -> Result<(String, Pattern), String> {
    let (plugin, pattern) = text
        .split_once('=')
        .ok_or_else(|| format!("`{text}`: not PLUGIN=scheme://host[:port]"))?;
    if plugin.is_empty() {
        return Err(format!("`{text}`: no plugin name before `=`"));
    }
    Ok((plugin.to_string(), Pattern::parse(pattern)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(u: &str) -> reqwest::Url {
        reqwest::Url::parse(u).unwrap()
    }

    #[test]
    fn patterns_match_scheme_host_and_port() {
        let p = Pattern::parse("https://API.example.com").unwrap();
        assert!(matches(&p, &url("https://api.example.com/zones/a?x=1")));
        assert!(matches(&p, &url("https://api.example.com:443/")));
        assert!(!matches(&p, &url("http://api.example.com/")));
        assert!(!matches(&p, &url("https://api.example.com:8443/")));
        assert!(!matches(&p, &url("https://api.example.com.evil.net/")));
        assert!(!matches(&p, &url("https://evil.net/?api.example.com")));

        let w = Pattern::parse("https://*.example.com:8443").unwrap();
        assert!(matches(&w, &url("https://a.example.com:8443/")));
        assert!(matches(&w, &url("https://a.b.example.com:8443/")));
        assert!(!matches(&w, &url("https://example.com:8443/")));
        assert!(!matches(&w, &url("https://aexample.com:8443/")));
        assert!(!names(&w, &url("https://a.example.com:8443/")));

        let l = Pattern::parse("http://127.0.0.1:18080/").unwrap();
        assert!(names(&l, &url("http://127.0.0.1:18080/records")));
        assert!(!matches(&l, &url("http://127.0.0.1:18081/records")));
        let any = Pattern::parse("http://127.0.0.1:*").unwrap();
        assert!(names(&any, &url("http://127.0.0.1:18081/records")));
        assert!(!matches(&any, &url("https://127.0.0.1:18081/records")));
        let v6 = Pattern::parse("http://[::1]:9000").unwrap();
        assert!(names(&v6, &url("http://[::1]:9000/x")));
    }

    #[test]
    fn bad_patterns_and_grants_say_why() {
        for bad in [
            "api.example.com",
            "ftp://a.example.com",
            "https://a.example.com/path",
            "https://user@a.example.com",
            "https://*",
            "https://a.*.com",
            "https://",
        ] {
            assert!(Pattern::parse(bad).is_err(), "{bad} parsed");
        }
        assert_eq!(
            parse_grant("dns=https://api.example.com").unwrap(),
            (
                "dns".to_string(),
                Pattern::parse("https://api.example.com").unwrap()
            )
        );
        assert!(parse_grant("https://api.example.com").is_err());
        assert!(parse_grant("=https://api.example.com").is_err());
    }
}
