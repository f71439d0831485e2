//! Inventories: raw fd targets and thread names grouped into counted kinds (Probe's method).
//!
//! Pure: the lists come from `sample::{fd_targets, thread_names}` and the Java stacks from a
//! `sample::StackSource`; this file only classifies, folds, counts and sorts.
#![forbid(unsafe_code)]

use crate::sample::JavaStack;
use serde::Serialize;
use std::collections::HashMap;

/// What an inventory lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum InventoryKind {
    Fd,
    Threads,
}

/// One group and its size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Group {
    pub name: String,
    pub count: u64,
}

/// Java stacks of the largest thread group: distinct stacks with how many threads share each.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StackGroup {
    pub count: u64,
    pub example_thread: String,
    pub frames: Vec<String>,
}

/// The groups of an fd or thread verdict, largest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Inventory {
    pub kind: InventoryKind,
    /// Items listed.
    pub total: u64,
    /// Groups, largest first (ties by name), at most `MAX_GROUPS`.
    pub groups: Vec<Group>,
    /// Groups left out.
    pub more_groups: u64,
    /// For threads: the Java stacks of the largest group.
    pub java_stacks: Vec<StackGroup>,
}

/// Groups kept in an inventory.
pub const MAX_GROUPS: usize = 50;

/// The kind of an fd from its `readlink` target: `socket:[123]` → `socket`, `pipe:[9]` → `pipe`,
/// `anon_inode:[eventfd]` stays, `/dev/ashmem/...` → `/dev/ashmem`, a path stays itself.
pub fn fd_kind(target: &str) -> &str {
    if target.starts_with("socket:") {
        "socket"
    } else if target.starts_with("pipe:") {
        "pipe"
    } else if target.starts_with("/dev/ashmem") {
        "/dev/ashmem"
    } else if let Some(rest) = target.strip_prefix("anon_inode:") {
        // `anon_inode:[eventfd]`, `anon_inode:inotify`, `anon_inode:[dmabuf:name]` → keep the
        // class.
        match rest.find(':').filter(|_| rest.starts_with('[')) {
            Some(i) => &target[..("anon_inode:".len() + i)],
            None => target,
        }
    } else {
        target
    }
}

/// A thread name with every run of digits replaced by `N`: `pool-3-thread-7` → `pool-N-thread-N`.
pub fn fold_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut in_digits = false;
    for c in name.chars() {
        if c.is_ascii_digit() {
            if !in_digits {
                out.push('N');
            }
            in_digits = true;
        } else {
            out.push(c);
            in_digits = false;
        }
    }
    out
}

/// Count items by key, largest first, ties by name; keep `MAX_GROUPS`.
pub fn group<'a>(
    kind: InventoryKind,
    keys: impl IntoIterator<Item = std::borrow::Cow<'a, str>>,
) -> Inventory {
    let mut m: HashMap<std::borrow::Cow<'a, str>, u64> = HashMap::new();
    let mut total = 0;
    for k in keys {
        *m.entry(k).or_insert(0) += 1;
        total += 1;
    }
    let mut groups: Vec<Group> = m
        .into_iter()
        .map(|(k, c)| Group {
            name: k.into_owned(),
            count: c,
        })
        .collect();
    sys::order::sort_by(&mut groups, |a, b| {
        b.count.cmp(&a.count).then_with(|| a.name.cmp(&b.name))
    });
    let more = groups.len().saturating_sub(MAX_GROUPS) as u64;
    groups.truncate(MAX_GROUPS);
    Inventory {
        kind,
        total,
        groups,
        more_groups: more,
        java_stacks: Vec::new(),
    }
}

/// Inventory of fd targets, grouped by [`fd_kind`].
pub fn fds(targets: &[String]) -> Inventory {
    group(
        InventoryKind::Fd,
        targets
            .iter()
            .map(|t| std::borrow::Cow::Borrowed(fd_kind(t))),
    )
}

/// Inventory of thread names, grouped by [`fold_name`].
pub fn threads(names: &[String]) -> Inventory {
    group(
        InventoryKind::Threads,
        names.iter().map(|n| std::borrow::Cow::Owned(fold_name(n))),
    )
}

/// Fold Java stacks into distinct stacks with counts, most common first.
pub fn stack_groups(stacks: Vec<JavaStack>) -> Vec<StackGroup> {
    let mut out: Vec<StackGroup> = Vec::new();
    for s in stacks {
        match out.iter_mut().find(|g| g.frames == s.frames) {
            Some(g) => g.count += 1,
            None => out.push(StackGroup {
                count: 1,
                example_thread: s.thread,
                frames: s.frames,
            }),
        }
    }
    sys::order::sort_by_key(&mut out, |g| std::cmp::Reverse(g.count));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fd_kinds_table() {
        let t = [
            ("socket:[12345]", "socket"),
            ("pipe:[777]", "pipe"),
            ("anon_inode:[eventfd]", "anon_inode:[eventfd]"),
            ("anon_inode:[eventpoll]", "anon_inode:[eventpoll]"),
            ("anon_inode:inotify", "anon_inode:inotify"),
            ("anon_inode:[dmabuf:gralloc]", "anon_inode:[dmabuf"),
            ("/dev/ashmem", "/dev/ashmem"),
            ("/dev/ashmem/dalvik-heap (deleted)", "/dev/ashmem"),
            ("/data/app/x/base.apk", "/data/app/x/base.apk"),
        ];
        for (i, o) in t {
            assert_eq!(fd_kind(i), o, "{i}");
        }
    }

    #[test]
    fn fold_table() {
        let t = [
            ("pool-3-thread-7", "pool-N-thread-N"),
            ("leaky-worker-123", "leaky-worker-N"),
            ("leaky-worker-12", "leaky-worker-N"), // comm is cut at 15 bytes
            ("main", "main"),
            ("Binder:1234_5", "Binder:N_N"),
            ("", ""),
            ("42", "N"),
        ];
        for (i, o) in t {
            assert_eq!(fold_name(i), o, "{i}");
        }
    }

    #[test]
    fn grouping_sorts_and_caps() {
        let mut targets: Vec<String> = (0..30).map(|i| format!("socket:[{i}]")).collect();
        targets.extend((0..5).map(|i| format!("pipe:[{i}]")));
        targets.extend((0..5).map(|_| "anon_inode:[eventfd]".to_string()));
        targets.extend((0..60).map(|i| format!("/data/f{i}")));
        let inv = fds(&targets);
        assert_eq!(inv.total, 100);
        assert_eq!(
            inv.groups[0],
            Group {
                name: "socket".into(),
                count: 30
            }
        );
        assert_eq!(
            inv.groups[1],
            Group {
                name: "anon_inode:[eventfd]".into(),
                count: 5
            }
        );
        assert_eq!(
            inv.groups[2],
            Group {
                name: "pipe".into(),
                count: 5
            }
        );
        assert_eq!(inv.groups.len(), MAX_GROUPS);
        assert_eq!(inv.more_groups, 63 - MAX_GROUPS as u64);
        let names: Vec<String> = [
            "pool-1-thread-1",
            "pool-1-thread-2",
            "pool-2-thread-1",
            "main",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let inv = threads(&names);
        assert_eq!(
            inv.groups,
            vec![
                Group {
                    name: "pool-N-thread-N".into(),
                    count: 3
                },
                Group {
                    name: "main".into(),
                    count: 1
                }
            ]
        );
    }

    #[test]
    fn stacks_fold() {
        let s = |t: &str, f: &[&str]| JavaStack {
            thread: t.into(),
            frames: f.iter().map(|x| x.to_string()).collect(),
        };
        let g = stack_groups(vec![
            s("a-1", &["x", "y"]),
            s("a-2", &["z"]),
            s("a-3", &["x", "y"]),
        ]);
        assert_eq!(g.len(), 2);
        assert_eq!((g[0].count, g[0].example_thread.as_str()), (2, "a-1"));
    }
}
