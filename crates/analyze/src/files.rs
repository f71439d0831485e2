//! The files of one incident, as the agent stores and uploads them and the collector files them:
//! one fixed file name and one upload `kind` each. The vocabulary both ends of an upload share
//! (it lives here, beside `report.json`'s types, because the collector may depend on this crate
//! and never on the agent's).

use serde::{Deserialize, Serialize};

/// The files an incident may hold; each has one fixed name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum FileKind {
    /// The full heap dump (kept only for analysis, never uploaded).
    FullDump,
    /// The stripped dump.
    MiniDump,
    /// The stripped dump, gzip-compressed once for upload.
    MiniDumpGz,
    /// The analyser's report.
    Report,
    /// Open file descriptors at the time of the incident.
    Fds,
    /// Threads at the time of the incident.
    Threads,
    /// The frozen metadata uploaded with the incident (reason, samples, evictions, losses).
    Meta,
}

impl FileKind {
    pub const ALL: [FileKind; 7] = [
        FileKind::FullDump,
        FileKind::MiniDump,
        FileKind::MiniDumpGz,
        FileKind::Report,
        FileKind::Fds,
        FileKind::Threads,
        FileKind::Meta,
    ];

    pub fn file_name(self) -> &'static str {
        match self {
            FileKind::FullDump => "dump.hprof",
            FileKind::MiniDump => "mini.hprof",
            FileKind::MiniDumpGz => "mini.hprof.gz",
            FileKind::Report => "report.json",
            FileKind::Fds => "fds.txt",
            FileKind::Threads => "threads.txt",
            FileKind::Meta => "meta.json",
        }
    }

    /// The name sent as the tus `kind` metadata.
    pub fn upload_kind(self) -> &'static str {
        match self {
            FileKind::FullDump => "dump",
            FileKind::MiniDump => "mini",
            FileKind::MiniDumpGz => "mini.gz",
            FileKind::Report => "report",
            FileKind::Fds => "fds",
            FileKind::Threads => "threads",
            FileKind::Meta => "meta",
        }
    }

    pub fn from_name(name: &str) -> Option<FileKind> {
        FileKind::ALL.into_iter().find(|k| k.file_name() == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each kind's file name and upload kind, as the agent stores and the collector files them,
    /// and each name read back to its kind (an unknown name to none).
    #[test]
    fn each_kind_has_its_fixed_names_and_is_found_by_its_file_name() {
        let names: Vec<(&str, &str)> = FileKind::ALL
            .iter()
            .map(|k| (k.file_name(), k.upload_kind()))
            .collect();
        assert_eq!(
            names,
            [
                ("dump.hprof", "dump"),
                ("mini.hprof", "mini"),
                ("mini.hprof.gz", "mini.gz"),
                ("report.json", "report"),
                ("fds.txt", "fds"),
                ("threads.txt", "threads"),
                ("meta.json", "meta"),
            ]
        );
        for k in FileKind::ALL {
            assert_eq!(FileKind::from_name(k.file_name()), Some(k));
        }
        assert_eq!(FileKind::from_name("mini"), None);
        assert_eq!(FileKind::from_name(""), None);
    }
}
