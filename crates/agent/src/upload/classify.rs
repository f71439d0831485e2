//! What an answer (or a failure) of the tus client means for the pass: the table in the
//! module doc of `upload`.

use super::*;

/// One incident's upload failed.
pub(super) enum Fail {
    /// 429, or 503 with `Retry-After` (seconds, when readable): come back later.
    ServerWait {
        status: u16,
        retry_after: Option<u64>,
    },
    /// The endpoint is wrong, not this incident.
    Endpoint {
        what: String,
        retry_after: Option<u64>,
    },
    Retryable(String),
    Rejected(String),
    /// A planned file no longer matches its plan (gone, or changed: bit rot, a torn write):
    /// that file is given up, the incident's others still go up.
    Gone {
        kind: FileKind,
        what: String,
    },
    Budget,
    /// The network may no longer be used (offline, or metered with `unmetered_only`).
    Network(Stop),
    Spool(SpoolError),
}

impl From<SpoolError> for Fail {
    fn from(e: SpoolError) -> Fail {
        Fail::Spool(e)
    }
}

/// The request an answer came to: a status can mean something else on each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Req {
    Create,
    Head,
    Patch,
}

impl std::fmt::Display for Req {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Req::Create => "creation POST",
            Req::Head => "HEAD",
            Req::Patch => "PATCH",
        })
    }
}

/// What an error of the tus client means (the table in the module doc). 404/410 (and 403 on
/// HEAD) of a known upload and 409 on PATCH are handled where they are met, never here.
/// `answered`: the endpoint has answered a request of this pass as tus says, so a failure now
/// may be this incident's; before that, a server that cannot be reached or answers as no tus
/// server does is the endpoint's problem.
pub(super) fn classify(req: Req, e: TusError, answered: bool) -> Fail {
    let unreachable = |e: &TusError| Fail::Endpoint {
        what: format!("{e} (answer to the {req}, before any request of this pass was answered)"),
        retry_after: None,
    };
    let (status, retry_after) = match &e {
        TusError::Status {
            status,
            retry_after,
            ..
        } => (*status, *retry_after),
        // The server handed out an upload URL we may not contact: its configuration.
        TusError::Insecure(_) => {
            return Fail::Endpoint {
                what: format!("{e} (an upload URL the server gave)"),
                retry_after: None,
            }
        }
        TusError::Network { .. } | TusError::Protocol { .. } if !answered => {
            return unreachable(&e)
        }
        TusError::Network { .. } | TusError::Protocol { .. } => {
            return Fail::Retryable(e.to_string())
        }
    };
    match (req, status) {
        (_, 429) => Fail::ServerWait {
            status,
            retry_after,
        },
        (_, 503) if retry_after.is_some() => Fail::ServerWait {
            status,
            retry_after,
        },
        // The creation carries this incident's length and metadata.
        (Req::Create, 400 | 413 | 422) => Fail::Rejected(e.to_string()),
        (Req::Patch, 460) => Fail::Retryable(e.to_string()),
        (_, 300..=499) => Fail::Endpoint {
            what: format!("{e} (answer to the {req})"),
            retry_after,
        },
        // A gateway or a server saying it is down (502, 503, 504) before the endpoint has
        // answered anything: an outage, which must not use up queued incidents' attempts.
        (_, 502..=504) if !answered => unreachable(&e),
        _ => Fail::Retryable(e.to_string()),
    }
}

/// An upload created in this pass that the server says it does not know: the URLs it hands
/// out do not reach it (a proxy routing only the creation, a wrong base path). Creating it
/// again would only repeat that.
pub(super) fn gone_at_once(url: &str, req: Req, answer: &str) -> Fail {
    Fail::Endpoint {
        what: format!("{url}: {answer} to the {req} of an upload created a moment ago"),
        retry_after: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(status: u16, retry_after: Option<u64>) -> TusError {
        TusError::Status {
            status,
            url: "https://x/files/".into(),
            retry_after,
            body: String::new(),
        }
    }

    fn kind(f: Fail) -> &'static str {
        match f {
            Fail::ServerWait { .. } => "wait",
            Fail::Endpoint { .. } => "endpoint",
            Fail::Retryable(_) => "attempt",
            Fail::Rejected(_) => "reject",
            Fail::Budget | Fail::Network(_) | Fail::Spool(_) | Fail::Gone { .. } => "other",
        }
    }

    /// The table of the module doc.
    #[test]
    fn answers_are_classified_by_what_they_are_about() {
        use Req::*;
        let table: &[(Req, u16, Option<u64>, &str)] = &[
            (Create, 400, None, "reject"),
            (Create, 413, None, "reject"),
            (Create, 422, None, "reject"),
            (Create, 401, None, "endpoint"),
            (Create, 403, None, "endpoint"),
            (Create, 404, None, "endpoint"),
            (Create, 405, None, "endpoint"),
            (Create, 407, None, "endpoint"),
            (Create, 408, None, "endpoint"),
            (Create, 410, None, "endpoint"),
            (Create, 412, None, "endpoint"),
            (Create, 415, None, "endpoint"),
            (Create, 418, None, "endpoint"),
            (Create, 451, None, "endpoint"),
            (Create, 301, None, "endpoint"),
            (Head, 400, None, "endpoint"),
            (Head, 401, None, "endpoint"),
            (Head, 413, None, "endpoint"),
            (Patch, 400, None, "endpoint"),
            (Patch, 403, None, "endpoint"),
            (Patch, 413, None, "endpoint"),
            (Patch, 415, None, "endpoint"),
            (Patch, 460, None, "attempt"),
            (Create, 429, None, "wait"),
            (Patch, 429, Some(5), "wait"),
            (Create, 503, Some(60), "wait"),
            (Create, 503, None, "attempt"),
            (Patch, 500, Some(60), "attempt"),
            (Head, 502, None, "attempt"),
        ];
        for &(req, code, ra, want) in table {
            assert_eq!(
                kind(classify(req, status(code, ra), true)),
                want,
                "{code} to {req}"
            );
            // Before anything was answered, only an outage (502 to 504) changes meaning.
            let before = match (code, want) {
                (502..=504, "attempt") => "endpoint",
                _ => want,
            };
            assert_eq!(
                kind(classify(req, status(code, ra), false)),
                before,
                "{code} to {req}, nothing answered yet"
            );
        }
        assert_eq!(kind(classify(Create, status(500, None), false)), "attempt");
        assert_eq!(kind(classify(Head, status(504, None), false)), "endpoint");
        let insecure = TusError::Insecure("http://example.com/files/1".into());
        assert_eq!(kind(classify(Create, insecure, true)), "endpoint");
        let net = || TusError::Network {
            url: "https://x/".into(),
            what: "reset".into(),
        };
        assert_eq!(kind(classify(Patch, net(), true)), "attempt");
        assert_eq!(kind(classify(Create, net(), false)), "endpoint");
        let odd = || TusError::Protocol {
            url: "https://x/".into(),
            what: "creation answer without Location".into(),
        };
        assert_eq!(kind(classify(Patch, odd(), true)), "attempt");
        assert_eq!(kind(classify(Create, odd(), false)), "endpoint");
    }

    /// What the log and the incident's record say of an endpoint problem names the request
    /// that met it, and keeps the server's `Retry-After`.
    #[test]
    fn an_endpoint_problem_names_the_request_it_met() {
        let endpoint = |f: Fail| match f {
            Fail::Endpoint { what, retry_after } => (what, retry_after),
            _ => panic!("not an endpoint problem"),
        };
        for (req, name) in [
            (Req::Create, "creation POST"),
            (Req::Head, "HEAD"),
            (Req::Patch, "PATCH"),
        ] {
            let (what, after) = endpoint(classify(req, status(401, Some(30)), true));
            assert!(what.starts_with("HTTP 401 from https://x/files/"), "{what}");
            assert!(what.ends_with(&format!("(answer to the {name})")), "{what}");
            assert_eq!(after, Some(30));
            let refused = TusError::Network {
                url: "https://x/".into(),
                what: "connection refused".into(),
            };
            let (what, after) = endpoint(classify(req, refused, false));
            let want =
                format!("(answer to the {name}, before any request of this pass was answered)");
            assert!(what.ends_with(&want), "{what}");
            assert_eq!(after, None);
            let (what, _) = endpoint(gone_at_once("https://x/files/1", req, "404"));
            assert_eq!(
                what,
                format!("https://x/files/1: 404 to the {name} of an upload created a moment ago")
            );
        }
    }
}
