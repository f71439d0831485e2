//! The pass's own rules, one incident after another: the byte budget's day, a resumed upload's
//! offset, the network and the quotas asked again before each incident, a plan that failed, a
//! rejection's evictions, a HEAD that disagrees, a checksum that is not ours.

use super::*;

/// The byte budget is a UTC day's: spent at 08:00, it is still spent a millisecond before
/// midnight (in a new process too), and renewed at midnight. Each day's PATCHes carry exactly
/// the budget, and the pass says so.
#[test]
fn the_byte_budget_is_renewed_at_utc_midnight_and_not_before() {
    const DAY: u64 = 24 * 3600 * 1000;
    let env = Env::new();
    let s = Scripted::new(|_, _| Act::Normal);
    let mut c = cfg(s.endpoint());
    c.daily_byte_budget = 80_000;
    let sum = upload::run_once(&env.spool(), &c, Network::UNMETERED).unwrap();
    assert_eq!(
        (sum.stopped, sum.bytes_sent),
        (Some(Stop::BudgetExhausted), 80_000)
    );
    let n = s.log().len();
    let midnight = (T0 / DAY + 1) * DAY;
    env.clock.set(midnight - 1);
    let sum = upload::run_once(&env.spool(), &c, Network::UNMETERED).unwrap();
    assert_eq!(
        (sum.stopped, sum.bytes_sent, s.log().len()),
        (Some(Stop::BudgetExhausted), 0, n)
    );
    env.clock.set(midnight);
    let sum = upload::run_once(&env.spool(), &c, Network::UNMETERED).unwrap();
    assert_eq!(
        (sum.stopped, sum.bytes_sent),
        (Some(Stop::BudgetExhausted), 80_000)
    );
}

/// A pass names the uploads it resumed and the offset the server had: one cut short after its
/// first chunk is resumed at that chunk's end; one the server holds no byte of is simply
/// sent from 0 and not named.
#[test]
fn a_resumed_upload_is_named_with_the_offset_the_server_had() {
    for (cut, offset) in [(0, None), (32 * 1024, Some(32 * 1024))] {
        let env = Env::new();
        let once = Arc::new(Mutex::new(true));
        let once2 = once.clone();
        let s = Scripted::new(move |h, _| {
            // The mini dump's PATCH at `cut` is cut off, once.
            let mini = h.method == "PATCH" && h.body > 20_000 && h.offset == Some(cut);
            if mini && std::mem::take(&mut *once2.lock().unwrap()) {
                Act::Reset
            } else {
                Act::Normal
            }
        });
        let sum = run(&env, &s);
        assert!(matches!(sum.stopped, Some(Stop::Backoff { .. })), "{sum:?}");
        assert_eq!(sum.resumed, vec![]);
        env.clock.set(env.incident().next_attempt_ms);
        let sum = run(&env, &s);
        let want: Vec<_> = offset
            .map(|o| (Env::id(1), "mini.gz", o))
            .into_iter()
            .collect();
        assert_eq!(
            (sum.acknowledged.len(), &sum.resumed),
            (1, &want),
            "{sum:?}"
        );
    }
}

/// Wi-Fi gives way to mobile data once the first incident is acknowledged: with
/// `unmetered_only`, the pass stops before the next incident, which sees no request at all
/// (not even its creations).
#[test]
fn a_network_that_turns_metered_between_incidents_stops_before_the_next_one() {
    let env = Env::with_incidents(2);
    let s = Scripted::new(|_, _| Act::Normal);
    let mut c = cfg(s.endpoint());
    c.unmetered_only = true;
    let first = env.root.join("incidents").join(Env::id(1));
    let network = || {
        if first.exists() {
            Network::UNMETERED
        } else {
            Network::METERED
        }
    };
    let sum = upload::run_once_with(&env.spool(), &c, &network).unwrap();
    assert_eq!(
        (sum.acknowledged, sum.stopped),
        (vec![Env::id(1)], Some(Stop::Metered))
    );
    let posts: Vec<_> = s
        .log()
        .into_iter()
        .filter(|h| h.method == "POST")
        .map(|h| h.incident.unwrap())
        .collect();
    assert_eq!(posts, vec![Env::id(1); 3]);
}

/// HEAD says the server holds another length under an upload's URL (it is not this file's
/// upload): the upload is created anew and sent from 0, not resumed into the other one.
#[test]
fn a_head_that_gives_another_length_creates_the_upload_again() {
    let env = Env::new();
    let once = Arc::new(Mutex::new(true));
    let once2 = once.clone();
    let s = Scripted::new(move |h, _| match h.method.as_str() {
        "PATCH" if h.body > 20_000 && std::mem::take(&mut *once2.lock().unwrap()) => Act::Reset,
        "HEAD" => Act::Status(
            200,
            vec![("Upload-Offset", "0".into()), ("Upload-Length", "1".into())],
        ),
        _ => Act::Normal,
    });
    let sum = run(&env, &s);
    assert!(matches!(sum.stopped, Some(Stop::Backoff { .. })), "{sum:?}");
    let n = s.log().len();
    env.clock.set(env.incident().next_attempt_ms);
    let sum = run(&env, &s);
    assert_eq!(sum.acknowledged.len(), 1, "{sum:?}");
    let log = s.log();
    assert_eq!(
        (log[n].method.as_str(), log[n + 1].method.as_str()),
        ("HEAD", "POST"),
        "{log:#?}"
    );
    // Every later PATCH goes to the new upload.
    let new = format!(
        "/files/u{}",
        log[..=n + 1].iter().filter(|h| h.method == "POST").count()
    );
    assert!(
        log[n + 2..]
            .iter()
            .all(|h| h.method == "PATCH" && h.path == new),
        "{log:#?}"
    );
}

/// A plan that cannot be made (the disk is full while the mini dump is compressed) is tried
/// again only after its backoff: a pass meanwhile counts the incident as waiting and sends
/// nothing; after the wait, with room on the disk, it goes up.
#[test]
fn an_incident_whose_plan_failed_waits_for_its_backoff() {
    let env = Env::new();
    let s = Scripted::new(|_, _| Act::Normal);
    let fs = oomguard::spool::FaultFs::new();
    let spool = Spool::with(
        &env.root,
        Quotas::default(),
        Arc::new(fs.clone()),
        env.clock.clone(),
    )
    .unwrap();
    let c = cfg(s.endpoint());
    fs.fail_at(0, oomguard::spool::Fault::NoSpace, true);
    let sum = upload::run_once(&spool, &c, Network::UNMETERED).unwrap();
    assert!(fs.tripped());
    assert_eq!((sum.waiting, &sum.stopped, s.log().len()), (0, &None, 0));
    fs.heal();
    let sum = upload::run_once(&spool, &c, Network::UNMETERED).unwrap();
    assert_eq!((sum.waiting, &sum.stopped, s.log().len()), (1, &None, 0));
    // The plan's backoff: `backoff_base` (10 s), jitter at most halving it.
    env.clock.set(T0 + 10_000);
    let sum = upload::run_once(&spool, &c, Network::UNMETERED).unwrap();
    assert_eq!((sum.waiting, sum.acknowledged.len()), (0, 1), "{sum:?}");
}

/// The quotas are enforced again before each incident of a pass: two incidents committed
/// while the first is being sent (a commit does not wait for the pass's lock, so it evicts
/// nothing) put the spool over its count of 2, and the oldest queued incident, planned in an
/// earlier pass, is evicted rather than sent.
#[test]
fn incidents_committed_during_a_pass_count_before_its_next_incident() {
    let env = Env::with_incidents(2);
    let quotas = Quotas {
        max_count: 2,
        ..Quotas::default()
    };
    let (root, clock) = (env.root.clone(), env.clock.clone());
    let s = Scripted::new(move |h, n| {
        if h.method == "POST" && n == 0 {
            clock.set(T0 + 60_000);
            let q = Quotas {
                max_count: 2,
                ..Quotas::default()
            };
            let spool = Spool::with(&root, q, Arc::new(RealFs), clock.clone()).unwrap();
            for k in 1..=2 {
                let st = spool
                    .stage_with_id(&format!("{}-late{k}", T0 + 60_000))
                    .unwrap();
                std::fs::write(st.path(FileKind::MiniDump), b"dump").unwrap();
                spool.commit(st, NewIncident::default()).unwrap();
            }
        }
        Act::Normal
    });
    let spool = Spool::with(&env.root, quotas, Arc::new(RealFs), env.clock.clone()).unwrap();
    // Both planned in an earlier pass: planning, which enforces the quotas itself, is not
    // what evicts the second.
    for i in 1..=2 {
        spool.lock().unwrap().plan_upload(&Env::id(i)).unwrap();
    }
    let sum = upload::run_once(&spool, &cfg(s.endpoint()), Network::UNMETERED).unwrap();
    assert_eq!(sum.acknowledged, vec![Env::id(1)], "{sum:?}");
    assert!(env.record(2).is_none(), "{:?}", env.record(2));
    let posts = s.methods().iter().filter(|m| *m == "POST").count();
    assert_eq!(posts, 3);
}

/// An incident carries the evictions its `meta.json` is to report. Rejected before that file
/// went up, it hands them back to the spool for the next incident; rejected after, it keeps
/// them (they reached the server). Here the pass's quota of one incident evicts the first, and
/// the second, planned with that eviction, is rejected by a 413 to its creation, or after its
/// `meta.json` was acknowledged by a 500 to its report's PATCH (one attempt allowed).
#[test]
fn a_rejected_incident_hands_back_the_evictions_its_meta_did_not_report() {
    for (meta_sent, carried) in [(false, 1), (true, 0)] {
        let env = Env::with_incidents(2);
        let quotas = Quotas {
            max_count: 1,
            ..Quotas::default()
        };
        let s = Scripted::new(move |h, _| match h.method.as_str() {
            "POST" if !meta_sent => Act::Status(413, vec![]),
            // The second upload created: the report's (meta, report, mini, in order).
            "PATCH" if meta_sent && h.path == "/files/u2" => Act::Status(500, vec![]),
            _ => Act::Normal,
        });
        let spool = Spool::with(&env.root, quotas, Arc::new(RealFs), env.clock.clone()).unwrap();
        let mut c = cfg(s.endpoint());
        c.max_attempts = 1;
        let sum = upload::run_once(&spool, &c, Network::UNMETERED).unwrap();
        let rejected: Vec<_> = sum.rejected.iter().map(|r| r.0.clone()).collect();
        assert_eq!(rejected, vec![Env::id(2)], "{sum:?}");
        let inc = env.record(2).unwrap();
        let meta_acked = inc
            .uploads
            .iter()
            .any(|u| u.kind == FileKind::Meta && u.acked);
        assert_eq!(meta_acked, meta_sent, "{inc:?}");
        assert_eq!(
            (spool.state().pending.evictions, inc.accounting.evictions),
            (carried, 1 - carried),
            "meta sent: {meta_sent}"
        );
    }
}

/// A HEAD that finds no upload under a URL created in this same pass (after a 409 to its
/// PATCH) says the URLs the endpoint hands out do not reach it: an endpoint problem that stops
/// the pass, not an upload to create again.
#[test]
fn a_head_404_for_an_upload_created_in_the_pass_is_an_endpoint_problem() {
    let env = Env::new();
    let once = Arc::new(Mutex::new(true));
    let once2 = once.clone();
    let s = Scripted::new(move |h, _| match h.method.as_str() {
        "PATCH" if h.body > 20_000 && std::mem::take(&mut *once2.lock().unwrap()) => {
            Act::Conflict(0)
        }
        "HEAD" => Act::Status(404, vec![]),
        _ => Act::Normal,
    });
    let sum = run(&env, &s);
    assert!(
        matches!(&sum.stopped, Some(Stop::Endpoint { error, .. }) if error.contains("404, 410 or 403")),
        "{sum:?}"
    );
    let m = s.methods();
    assert_eq!(m.iter().filter(|x| *x == "POST").count(), 3, "{m:?}");
    assert_eq!(m.last().map(String::as_str), Some("HEAD"), "{m:?}");
    none_rejected(&env, 1, &sum, "HEAD 404");
}

/// The server has every byte of a resumed upload but reports another SHA-256 than ours: the
/// attempt fails, the URL is dropped, and the next attempt sends the file again in a new upload.
#[test]
fn a_server_sha256_that_is_not_ours_sends_the_file_again() {
    let env = Env::new();
    let once = Arc::new(Mutex::new(true));
    let once2 = once.clone();
    let head: Arc<Mutex<Option<Act>>> = Arc::new(Mutex::new(None));
    let head2 = head.clone();
    let s = Scripted::new(move |h, _| match h.method.as_str() {
        "PATCH" if h.body > 20_000 && std::mem::take(&mut *once2.lock().unwrap()) => Act::Reset,
        "HEAD" => head2.lock().unwrap().take().unwrap_or(Act::Normal),
        _ => Act::Normal,
    });
    let sum = run(&env, &s);
    assert!(matches!(sum.stopped, Some(Stop::Backoff { .. })), "{sum:?}");
    let inc = env.incident();
    let size = inc
        .uploads
        .iter()
        .find(|u| u.kind == FileKind::MiniDumpGz)
        .unwrap()
        .size;
    let other = "ab".repeat(32);
    *head.lock().unwrap() = Some(Act::Status(
        200,
        vec![
            ("Upload-Offset", size.to_string()),
            ("Upload-Length", size.to_string()),
            ("Upload-Sha256", other.clone()),
        ],
    ));
    env.clock.set(inc.next_attempt_ms);
    let sum = run(&env, &s);
    let want = format!("mini.hprof.gz: the server stored SHA-256 {other}, ours is ");
    assert!(
        matches!(&sum.stopped, Some(Stop::Backoff { error, .. }) if error.contains(&want)),
        "{sum:?}"
    );
    let inc = env.incident();
    let mini = inc
        .uploads
        .iter()
        .find(|u| u.kind == FileKind::MiniDumpGz)
        .unwrap();
    assert_eq!(
        (mini.url.as_deref(), mini.acked, inc.upload_attempts),
        (None, false, 2)
    );
    let posts = s.methods().iter().filter(|m| *m == "POST").count();
    env.clock.set(inc.next_attempt_ms);
    let sum = run(&env, &s);
    assert_eq!(sum.acknowledged.len(), 1, "{sum:?}");
    assert_eq!(
        s.methods().iter().filter(|m| *m == "POST").count(),
        posts + 1
    );
}
