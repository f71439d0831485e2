//! A small file system to fill, for the tests of what a full disk does.

use std::process::Command;

/// A tmpfs of `kb` KiB mounted on a fresh directory, unmounted on drop; `None` (and a line
/// saying so) where the tests may not mount one.
pub struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    pub fn mount(test: &str, kb: u32) -> Option<SmallDisk> {
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={kb}k"), "tmpfs"])
            .arg(dir.path())
            .output();
        match out {
            Ok(o) if o.status.success() => Some(SmallDisk { dir }),
            Ok(o) => {
                let err = String::from_utf8_lossy(&o.stderr);
                println!("SKIPPED {test}: cannot mount a tmpfs here: {}", err.trim());
                None
            }
            Err(e) => {
                println!("SKIPPED {test}: cannot run mount: {e}");
                None
            }
        }
    }

    pub fn path(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// Take every free block with zeros appended to the file `fill` (the write that finds none
    /// must fail for want of space).
    pub fn fill(&self) {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.path().join("fill"))
            .unwrap();
        let block = [0u8; 4096];
        loop {
            match f.write(&block) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) => {
                    assert_eq!(e.kind(), std::io::ErrorKind::StorageFull, "{e}");
                    break;
                }
            }
        }
        assert!(
            std::fs::write(self.path().join("probe"), [1u8; 4096]).is_err(),
            "the disk is full"
        );
    }

    /// Give the blocks [`SmallDisk::fill`] took back.
    pub fn free(&self) {
        std::fs::remove_file(self.path().join("fill")).unwrap();
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(self.path()).status();
    }
}
