//! Sending one incident: its uploads created (URLs kept before any byte goes out), each file
//! PATCHed from the server's offset, the byte budget, and the final check of each file.

use super::*;

pub(super) fn upload_incident(
    guard: &SpoolGuard<'_>,
    client: &Client,
    cfg: &Config,
    inc: &mut Incident,
    sum: &mut Summary,
) -> Result<(), Fail> {
    let spool = guard.spool();
    let dir = spool.incident_dir(&inc.id);
    // Never send bytes that differ from the plan (bit rot, a torn file): such a file is given
    // up (quarantined, counted as a loss), the others still go up.
    let mut changed = Vec::new();
    for u in inc.uploads.iter().filter(|u| !u.acked) {
        let path = dir.join(u.kind.file_name());
        match spool::hash_file(spool.fs(), &path) {
            Ok((s, n)) if s == u.sha256 && n == u.size => {}
            Ok((s, n)) => changed.push((
                u.kind,
                format!(
                    "planned file changed before its upload: {n} bytes with SHA-256 {s}, \
                     planned {} bytes with {}",
                    u.size, u.sha256
                ),
            )),
            Err(e) => match unreadable(&path, u.kind, e) {
                Fail::Gone { kind, what } => changed.push((kind, what)),
                f => return Err(f),
            },
        }
    }
    for (kind, what) in changed {
        guard.drop_planned(inc, kind, &what)?;
    }
    // Create every missing upload, then persist all URLs with one write, before any byte of
    // content goes out: a restart resumes them with HEAD.
    let mut fresh = vec![false; inc.uploads.len()];
    let mut created = Ok(());
    for (i, f) in fresh.iter_mut().enumerate() {
        let u = &inc.uploads[i];
        if u.acked || u.url.is_some() {
            continue;
        }
        match create(client, inc, i) {
            Ok(url) => {
                inc.uploads[i].url = Some(url);
                *f = true;
            }
            Err(e) => {
                created = Err(e);
                break;
            }
        }
    }
    if fresh.iter().any(|f| *f) {
        guard.save(inc)?;
    }
    created?;
    for (i, f) in fresh.into_iter().enumerate() {
        if inc.uploads[i].acked {
            continue;
        }
        upload_file(guard, client, cfg, inc, i, f, sum)?;
        // On disk before the next file's bytes go out: after a crash, an acknowledged file is
        // never sent again (HEAD could say it again, unless the server expired the upload).
        inc.uploads[i].acked = true;
        if let Err(e) = guard.save(inc) {
            // The upload goes on; only a crash before the next save would resend this file.
            tracing::warn!("upload: {}: saving an acknowledgement failed: {e}", inc.id);
        }
    }
    Ok(())
}

/// A planned file that cannot be read: gone, that file is given up (the incident's others
/// still go up); any other error (out of file descriptors, EIO, a permission) may pass, so it
/// is a failed attempt, retried with backoff, and never moves an intact incident into
/// quarantine.
pub(super) fn unreadable(path: &std::path::Path, kind: FileKind, e: std::io::Error) -> Fail {
    if e.kind() == std::io::ErrorKind::NotFound {
        Fail::Gone {
            kind,
            what: "planned file gone before its upload".into(),
        }
    } else {
        Fail::Retryable(format!("{}: {e}", path.display()))
    }
}

pub(super) fn create(client: &Client, inc: &Incident, i: usize) -> Result<String, Fail> {
    let u = &inc.uploads[i];
    client
        .create(
            u.size,
            &[
                ("incident", &inc.id),
                ("kind", u.kind.upload_kind()),
                ("sha256", &u.sha256),
                ("filename", u.kind.file_name()),
            ],
        )
        .map_err(|e| classify(Req::Create, e, client.answered()))
}

/// Bytes left in today's budget.
pub(super) fn budget_left(spool: &Spool, cfg: &Config) -> u64 {
    let st = spool.state();
    let used = if st.budget_day == spool.now_ms() / DAY_MS {
        st.bytes_sent_today
    } else {
        0
    };
    cfg.daily_byte_budget.saturating_sub(used)
}

/// Reserve up to `want` bytes of today's budget; returns how many may be sent.
pub(super) fn reserve(spool: &Spool, cfg: &Config, want: u64) -> Result<u64, Fail> {
    let day = spool.now_ms() / DAY_MS;
    let n = want.min(budget_left(spool, cfg));
    if n == 0 {
        return Err(Fail::Budget);
    }
    spool.update_state(|s| {
        if s.budget_day != day {
            s.budget_day = day;
            s.bytes_sent_today = 0;
        }
        s.bytes_sent_today += n;
    })?;
    Ok(n)
}

pub(super) fn upload_file(
    guard: &SpoolGuard<'_>,
    client: &Client,
    cfg: &Config,
    inc: &mut Incident,
    i: usize,
    mut fresh: bool,
    sum: &mut Summary,
) -> Result<(), Fail> {
    let spool = guard.spool();
    let kind: FileKind = inc.uploads[i].kind;
    let path = spool.incident_dir(&inc.id).join(kind.file_name());
    let size = inc.uploads[i].size;
    let upload_kind = kind.upload_kind();
    // The URL was created in this pass (the server cannot have let it expire since).
    let mut created_here = fresh;
    // The server does not know the URL, or holds another length under it: create the upload
    // anew. The old URL stays (in memory and on disk) until the new one exists, so that a
    // creation refused by an endpoint problem leaves it to be asked about next time.
    let mut stale = false;
    for _round in 0..8 {
        let mut offset;
        match inc.uploads[i].url.clone().filter(|_| !stale) {
            None => {
                let url = create(client, inc, i)?;
                inc.uploads[i].url = Some(url);
                guard.save(inc)?;
                (stale, created_here) = (false, true);
                offset = 0;
            }
            Some(_) if fresh => {
                fresh = false;
                offset = 0;
            }
            Some(url) => match client
                .head(&url)
                .map_err(|e| classify(Req::Head, e, client.answered()))?
            {
                None if created_here => {
                    return Err(gone_at_once(&url, Req::Head, "404, 410 or 403"));
                }
                None => {
                    tracing::info!("upload: {url} unknown to the server; creating it again");
                    stale = true;
                    continue;
                }
                Some(h) => {
                    if h.length.is_some_and(|l| l != size) || h.offset > size {
                        tracing::warn!(
                            "upload: {url}: server has offset {} length {:?}, ours is {size}; starting again",
                            h.offset,
                            h.length
                        );
                        stale = true;
                        continue;
                    }
                    offset = h.offset;
                    if offset > 0 {
                        sum.resumed.push((inc.id.clone(), upload_kind, offset));
                    }
                    if offset == size {
                        return verify(guard, inc, i, h.sha256.as_deref());
                    }
                }
            },
        }
        let url = inc.uploads[i].url.clone().unwrap_or_default();
        let mut file = spool
            .fs()
            .open(&path)
            .map_err(|e| unreadable(&path, kind, e))?;
        // One budget reservation for what is left of the file (counted before it is sent).
        let mut allowed = reserve(spool, cfg, size - offset)?;
        'send: while offset < size {
            if allowed == 0 {
                allowed = reserve(spool, cfg, size - offset)?;
            }
            let n = (size - offset).min(cfg.chunk_size.max(1)).min(allowed);
            file.seek(SeekFrom::Start(offset))
                .map_err(|e| Fail::Local(format!("{}: {e}", path.display())))?;
            match client.patch(&url, offset, &mut file, n) {
                Ok(p) => {
                    sum.bytes_sent += n;
                    allowed -= n;
                    // An offset that did not move (the server kept none of the bytes) is no
                    // better than one that moved back: sending the same chunk again would
                    // spend the byte budget on nothing, every day. Ask with HEAD; the rounds
                    // are bounded, and then the attempt counts as failed.
                    if p.offset > size || p.offset <= offset {
                        tracing::warn!(
                            "upload: {url}: PATCH of {n} bytes at offset {offset} answered offset {}",
                            p.offset
                        );
                        break 'send; // ask with HEAD
                    }
                    offset = p.offset;
                    if offset == size {
                        return verify(guard, inc, i, p.sha256.as_deref());
                    }
                }
                Err(TusError::Status { status: 409, .. }) => break 'send,
                Err(TusError::Status {
                    status: status @ (404 | 410),
                    ..
                }) => {
                    if created_here {
                        return Err(gone_at_once(&url, Req::Patch, &status.to_string()));
                    }
                    stale = true;
                    break 'send;
                }
                Err(e) => return Err(classify(Req::Patch, e, client.answered())),
            }
        }
    }
    Err(Fail::Retryable(format!(
        "{}: the server's offsets kept disagreeing with ours",
        path.display()
    )))
}

/// The server has every byte: accept it if its SHA-256 (when it says one) is ours.
pub(super) fn verify(
    guard: &SpoolGuard<'_>,
    inc: &mut Incident,
    i: usize,
    server_sha: Option<&str>,
) -> Result<(), Fail> {
    match server_sha {
        Some(s) if !s.eq_ignore_ascii_case(&inc.uploads[i].sha256) => {
            let what = format!(
                "{}: the server stored SHA-256 {s}, ours is {}; uploading it again",
                inc.uploads[i].kind.file_name(),
                inc.uploads[i].sha256
            );
            inc.uploads[i].url = None;
            guard.save(inc)?;
            Err(Fail::Retryable(what))
        }
        _ => Ok(()),
    }
}
