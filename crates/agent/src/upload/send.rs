//! Sending one incident: its uploads created (URLs kept before any byte goes out), each file
//! PATCHed from the server's offset, the byte budget, and the final check of each file.

use super::*;

pub(super) fn upload_incident(
    guard: &SpoolGuard<'_>,
    client: &Client,
    cfg: &Config,
    network: &dyn Fn() -> Network,
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
        UNSAVED.save(guard, inc)?;
    }
    created?;
    for (i, f) in fresh.into_iter().enumerate() {
        if inc.uploads[i].acked {
            continue;
        }
        let link = Link {
            client,
            cfg,
            network,
        };
        upload_file(guard, &link, inc, i, f, sum)?;
        // On disk before the next file's bytes go out: after a crash, an acknowledged file is
        // never sent again (HEAD could say it again, unless the server expired the upload).
        inc.uploads[i].acked = true;
        if let Err(e) = UNSAVED.save(guard, inc) {
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

/// Charge `n` bytes that went out to today's budget. On a full disk the count stays in memory
/// (the spool keeps its state there until a write succeeds) and the pass goes on: uploading is
/// what frees the disk.
fn charge(spool: &Spool, n: u64) {
    if n == 0 {
        return;
    }
    let day = spool.now_ms() / DAY_MS;
    if let Err(e) = spool.update_state(|s| {
        if s.budget_day != day {
            s.budget_day = day;
            s.bytes_sent_today = 0;
        }
        s.bytes_sent_today += n;
    }) {
        tracing::warn!("upload: the byte budget could not be saved ({e}); counted in memory");
    }
}

/// What one pass sends through: the tus client, the settings, and the network as it is now.
pub(super) struct Link<'a> {
    pub(super) client: &'a Client,
    pub(super) cfg: &'a Config,
    pub(super) network: &'a dyn Fn() -> Network,
}

pub(super) fn upload_file(
    guard: &SpoolGuard<'_>,
    link: &Link<'_>,
    inc: &mut Incident,
    i: usize,
    mut fresh: bool,
    sum: &mut Summary,
) -> Result<(), Fail> {
    let (client, cfg, network) = (link.client, link.cfg, link.network);
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
                UNSAVED.save(guard, inc)?;
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
        // Opened here to tell a file that cannot be read (a local failure, counted as such)
        // from a network error; the transport reads it by its path.
        drop(
            spool
                .fs()
                .open(&path)
                .map_err(|e| unreadable(&path, kind, e))?,
        );
        'send: while offset < size {
            // Asked before each chunk: Wi-Fi may have given way to mobile data.
            if let Some(stop) = network_stop(cfg, network()) {
                return Err(Fail::Network(stop));
            }
            // Charged with what each PATCH sent, once it is over: a PATCH cut short charges
            // only the bytes that went out (a kill during one forgets at most that chunk).
            let n = (size - offset)
                .min(cfg.chunk_size.max(1))
                .min(budget_left(spool, cfg));
            if n == 0 {
                return Err(Fail::Budget);
            }
            // The file is read from `offset` by the transport, in chunks, as it goes out.
            let (sent, r) = client.patch_file(&url, offset, &path, n);
            charge(spool, sent.min(n));
            match r {
                Ok(p) => {
                    sum.bytes_sent += n;
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
            UNSAVED.save(guard, inc)?;
            Err(Fail::Retryable(what))
        }
        _ => Ok(()),
    }
}
