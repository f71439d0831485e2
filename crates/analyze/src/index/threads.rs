//! The dump's threads, so that a path that starts on a thread can name it (issue 32).
//!
//! What the dump says of threads, and where:
//! - ROOT_THREAD_OBJECT: a thread's object, its thread serial and its stack trace serial;
//! - the roots on a thread's stack (ROOT_JAVA_FRAME, ROOT_JNI_LOCAL, ROOT_JNI_MONITOR: thread
//!   serial and frame number; ROOT_NATIVE_STACK, ROOT_THREAD_BLOCK: thread serial);
//! - TRACE and FRAME records (HotSpot writes one trace per thread; ART writes none): the methods
//!   on a thread's stack, innermost first, which a Java frame root's frame number indexes.
//!
//! The thread's name is not here: it is a string, whose characters a stripped dump does not
//! hold. The report names a thread by its Java thread id (the thread object's `tid` field, which
//! survives the strip) and the agent's list of the process's threads (see `analyze::trace`).
#![forbid(unsafe_code)]

use hprof::{read_u32, sub, Record};

/// A frame number that says nothing (ART writes -1; ROOT_NATIVE_STACK has none).
pub const NO_FRAME: u32 = u32::MAX;

/// What pass 1 gathers, by object id (resolved to nodes by [`RawThreads::finish`]).
#[derive(Default)]
pub(crate) struct RawThreads {
    /// ROOT_THREAD_OBJECT: (object id, thread serial, stack trace serial).
    objects: Vec<(u64, u32, u32)>,
    /// Roots on a thread's stack: (object id, tag, thread serial, frame number).
    on_stack: Vec<(u64, u8, u32, u32)>,
    /// TRACE: (serial, thread serial, frame ids).
    traces: Vec<(u32, u32, Vec<u64>)>,
    /// FRAME: (frame id, method name id, source file id, class serial, line).
    frames: Vec<(u64, u64, u64, u32, i32)>,
    /// LOAD_CLASS: (class serial, class object id).
    class_serials: Vec<(u32, u64)>,
}

impl RawThreads {
    /// A top-level record (TRACE, FRAME, LOAD_CLASS are kept).
    pub(crate) fn record(&mut self, r: &Record<'_>) {
        if let Some((serial, class_id, _, _)) = r.load_class() {
            self.class_serials.push((serial, class_id));
        } else if let Some(f) = r.frame() {
            self.frames.push(f);
        } else if let Some((serial, thread, frames)) = r.trace() {
            self.traces.push((serial, thread, frames.collect()));
        }
    }

    /// A root sub-record (`aux`: what follows its id).
    pub(crate) fn root(&mut self, tag: u8, id: u64, aux: &[u8]) {
        let word = |i: usize| aux.get(i * 4..i * 4 + 4).map(read_u32);
        match tag {
            sub::ROOT_THREAD_OBJECT => {
                if let Some(serial) = word(0) {
                    self.objects.push((id, serial, word(1).unwrap_or(NO_FRAME)));
                }
            }
            sub::ROOT_JAVA_FRAME
            | sub::ROOT_JNI_LOCAL
            | sub::ROOT_JNI_MONITOR
            | sub::ROOT_NATIVE_STACK
            | sub::ROOT_THREAD_BLOCK => {
                if let Some(serial) = word(0) {
                    self.on_stack
                        .push((id, tag, serial, word(1).unwrap_or(NO_FRAME)));
                }
            }
            _ => {}
        }
    }

    /// Add what another worker gathered over a later part of the file.
    pub(crate) fn merge(&mut self, o: RawThreads) {
        self.objects.extend(o.objects);
        self.on_stack.extend(o.on_stack);
        self.traces.extend(o.traces);
        self.frames.extend(o.frames);
        self.class_serials.extend(o.class_serials);
    }

    /// Resolve ids to nodes (`ids` sorted) and frames to text; `string` reads a string id,
    /// `class_name` names a class object id.
    pub(crate) fn finish(
        mut self,
        ids: &[u64],
        string: impl Fn(u64) -> Option<String>,
        class_name: impl Fn(u64) -> Option<String>,
    ) -> Threads {
        let node = |id: u64| ids.binary_search(&id).ok().map(|n| n as u32);
        let mut objects: Vec<(u32, u32, u32)> = self
            .objects
            .iter()
            .filter_map(|&(id, serial, trace)| Some((serial, node(id)?, trace)))
            .collect();
        objects.sort_unstable();
        objects.dedup_by_key(|e| e.0);
        let mut on_stack: Vec<(u32, u8, u32, u32)> = self
            .on_stack
            .iter()
            .filter_map(|&(id, tag, serial, frame)| Some((node(id)?, tag, serial, frame)))
            .collect();
        on_stack.sort_unstable();
        on_stack.dedup();
        self.frames.sort_unstable_by_key(|f| f.0);
        self.class_serials.sort_unstable();
        let frame_text = |fid: u64| -> String {
            let Ok(i) = self.frames.binary_search_by_key(&fid, |f| f.0) else {
                return format!("<frame 0x{fid:x}>");
            };
            let (_, method, source, class_serial, line) = self.frames[i];
            let class = self
                .class_serials
                .binary_search_by_key(&class_serial, |e| e.0)
                .ok()
                .and_then(|k| class_name(self.class_serials[k].1))
                .unwrap_or_else(|| "<unknown class>".into());
            let method = string(method).unwrap_or_else(|| "<unknown method>".into());
            let source = string(source).filter(|s| !s.is_empty());
            let at = match (line, source) {
                (-3, _) => "Native Method".to_string(),
                (l, Some(s)) if l > 0 => format!("{s}:{l}"),
                (_, Some(s)) => s,
                (_, None) => "Unknown Source".into(),
            };
            format!("{class}.{method}({at})")
        };
        let mut traces: Vec<(u32, u32, Vec<String>)> = self
            .traces
            .iter()
            .map(|(serial, thread, frames)| {
                (
                    *serial,
                    *thread,
                    frames.iter().map(|&f| frame_text(f)).collect(),
                )
            })
            .collect();
        traces.sort_unstable_by_key(|t| t.0);
        traces.dedup_by_key(|t| t.0);
        Threads {
            objects,
            on_stack,
            traces,
        }
    }
}

/// The dump's threads (see the module documentation).
#[derive(Clone, Debug, Default)]
pub struct Threads {
    /// ROOT_THREAD_OBJECT: (thread serial, thread object node, stack trace serial), by serial.
    objects: Vec<(u32, u32, u32)>,
    /// Roots on a thread's stack: (node, tag, thread serial, frame number), sorted.
    on_stack: Vec<(u32, u8, u32, u32)>,
    /// TRACE: (serial, thread serial, frames as `Class.method(File.java:12)`), by serial.
    traces: Vec<(u32, u32, Vec<String>)>,
}

/// Where a root on a thread's stack is.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OnThread {
    /// The thread's object, if the dump lists it.
    pub thread: Option<u32>,
    /// The method of the root's frame (`Class.method(File.java:12)`), if the dump says.
    pub frame: Option<String>,
}

impl Threads {
    /// Rewrites each stack frame's text (`Class.method(File.java:12)`) that `f` turns into
    /// another (a release build's renames turned back).
    pub(crate) fn rename_frames(&mut self, f: impl Fn(&str) -> Option<String>) {
        for (_, _, frames) in &mut self.traces {
            for t in frames.iter_mut() {
                if let Some(n) = f(t) {
                    *t = n;
                }
            }
        }
    }

    /// The thread object of thread serial `serial`.
    fn object(&self, serial: u32) -> Option<&(u32, u32, u32)> {
        let i = self.objects.binary_search_by_key(&serial, |e| e.0).ok()?;
        Some(&self.objects[i])
    }

    /// Where root `node` of tag `tag` is: its thread and frame (the first the dump lists for
    /// that node and tag, by thread serial then frame); `None` for a root of no thread.
    pub fn on_thread(&self, node: u32, tag: u8) -> Option<OnThread> {
        let i = self.on_stack.partition_point(|e| (e.0, e.1) < (node, tag));
        let &(n, t, serial, frame) = self.on_stack.get(i)?;
        if (n, t) != (node, tag) {
            return None;
        }
        let obj = self.object(serial);
        let trace = match obj {
            Some(&(_, _, ts)) if ts != NO_FRAME => self
                .traces
                .binary_search_by_key(&ts, |e| e.0)
                .ok()
                .map(|k| &self.traces[k].2),
            // No trace serial on the thread: the trace that names the thread.
            _ => self.traces.iter().find(|e| e.1 == serial).map(|e| &e.2),
        };
        let frame = (tag == sub::ROOT_JAVA_FRAME || tag == sub::ROOT_JNI_LOCAL)
            .then(|| trace?.get(frame as usize).cloned())
            .flatten();
        Some(OnThread {
            thread: obj.map(|o| o.1),
            frame,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hprof::tag;

    fn rec(tag: u8, body: Vec<u8>) -> (u8, Vec<u8>) {
        (tag, body)
    }

    /// TRACE/FRAME/LOAD_CLASS records with 4-byte ids.
    fn feed(t: &mut RawThreads, recs: &[(u8, Vec<u8>)]) {
        for (tg, body) in recs {
            t.record(&Record {
                tag: *tg,
                time: 0,
                body,
                id_size: 4,
            });
        }
    }

    fn be(words: &[u32]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_be_bytes()).collect()
    }

    #[test]
    fn a_java_frame_root_names_its_thread_and_method() {
        let mut t = RawThreads::default();
        feed(
            &mut t,
            &[
                // LOAD_CLASS serial 7, class 0x70, trace 0, name 0x71
                rec(tag::LOAD_CLASS, be(&[7, 0x70, 0, 0x71])),
                // FRAME 0x10: method 0x11, sig 0x12, source 0x13, class 7, line 42
                rec(tag::FRAME, be(&[0x10, 0x11, 0x12, 0x13, 7, 42])),
                rec(tag::FRAME, be(&[0x20, 0x21, 0x12, 0, 7, (-3i32) as u32])),
                // TRACE serial 5, thread 3, frames [0x20, 0x10]
                rec(tag::TRACE, be(&[5, 3, 2, 0x20, 0x10])),
            ],
        );
        t.root(sub::ROOT_THREAD_OBJECT, 0x100, &be(&[3, 5]));
        t.root(sub::ROOT_JAVA_FRAME, 0x200, &be(&[3, 1]));
        t.root(sub::ROOT_JAVA_FRAME, 0x200, &be(&[3, 0]));
        t.root(sub::ROOT_JNI_LOCAL, 0x300, &be(&[9, 0]));
        t.root(sub::ROOT_NATIVE_STACK, 0x400, &be(&[3]));
        let ids = [0x100, 0x200, 0x300, 0x400];
        let strings = |id: u64| match id {
            0x11 => Some("run".to_string()),
            0x21 => Some("sleep".to_string()),
            0x13 => Some("Worker.java".to_string()),
            _ => None,
        };
        let classes = |id: u64| (id == 0x70).then(|| "app.Worker".to_string());
        let th = t.finish(&ids, strings, classes);
        assert_eq!(
            th.on_thread(1, sub::ROOT_JAVA_FRAME),
            Some(OnThread {
                thread: Some(0),
                frame: Some("app.Worker.sleep(Native Method)".into())
            }),
            "the first frame listed for a node is the innermost"
        );
        assert_eq!(th.on_thread(1, sub::ROOT_JNI_LOCAL), None);
        assert_eq!(
            th.on_thread(2, sub::ROOT_JNI_LOCAL),
            Some(OnThread::default()),
            "thread serial 9 is not in the dump"
        );
        assert_eq!(
            th.on_thread(3, sub::ROOT_NATIVE_STACK),
            Some(OnThread {
                thread: Some(0),
                frame: None
            })
        );
    }

    #[test]
    fn a_frame_past_the_trace_or_of_art_names_no_method() {
        let mut t = RawThreads::default();
        feed(
            &mut t,
            &[
                rec(tag::FRAME, be(&[0x10, 0x11, 0x12, 0x13, 7, 42])),
                rec(tag::TRACE, be(&[5, 3, 1, 0x10])),
            ],
        );
        // ART: no trace serial, frame -1.
        t.root(sub::ROOT_THREAD_OBJECT, 0x100, &be(&[3, u32::MAX]));
        t.root(sub::ROOT_JAVA_FRAME, 0x200, &be(&[3, u32::MAX]));
        t.root(sub::ROOT_JAVA_FRAME, 0x300, &be(&[3, 0]));
        let th = t.finish(&[0x100, 0x200, 0x300], |_| None, |_| None);
        assert_eq!(th.on_thread(1, sub::ROOT_JAVA_FRAME).unwrap().frame, None);
        // The trace that names thread 3, though the thread object gives no serial; the
        // frame's class and method are not in the dump.
        assert_eq!(
            th.on_thread(2, sub::ROOT_JAVA_FRAME)
                .unwrap()
                .frame
                .as_deref(),
            Some("<unknown class>.<unknown method>(Unknown Source)")
        );
    }

    /// A frame's place: its source file and line, the file alone for a line of 0 or less, no
    /// file (empty or absent) as "Unknown Source", and a native method's (-3) as such; in the
    /// trace the thread object names (not another of its thread), for a Java frame or a JNI
    /// local. Also after a merge of what two workers gathered (the frames from one, the roots
    /// from the other), and renamed by [`Threads::rename_frames`].
    #[test]
    fn a_frame_names_its_file_and_line_after_a_merge_and_a_rename() {
        let mut records = RawThreads::default();
        feed(
            &mut records,
            &[
                rec(tag::LOAD_CLASS, be(&[7, 0x70, 0, 0x71])),
                // FRAME id, method, signature, source, class serial, line.
                rec(tag::FRAME, be(&[0x10, 0x11, 0x12, 0x13, 7, 42])),
                rec(tag::FRAME, be(&[0x20, 0x11, 0x12, 0x13, 7, 0])),
                rec(tag::FRAME, be(&[0x30, 0x11, 0x12, 0x14, 7, 42])),
                rec(tag::FRAME, be(&[0x40, 0x11, 0x12, 0x13, 7, (-3i32) as u32])),
                // Two traces of thread 3: the thread object's (5) is not the first.
                rec(tag::TRACE, be(&[4, 3, 1, 0x40])),
                rec(tag::TRACE, be(&[5, 3, 4, 0x10, 0x20, 0x30, 0x40])),
            ],
        );
        let mut roots = RawThreads::default();
        roots.root(sub::ROOT_THREAD_OBJECT, 0x100, &be(&[3, 5]));
        for (id, frame) in [(0x200, 0), (0x300, 1), (0x400, 2), (0x500, 3)] {
            roots.root(sub::ROOT_JAVA_FRAME, id, &be(&[3, frame]));
        }
        roots.root(sub::ROOT_JNI_LOCAL, 0x600, &be(&[3, 0]));
        roots.root(sub::ROOT_JNI_MONITOR, 0x700, &be(&[3, 0]));
        records.merge(roots);
        let strings = |id: u64| match id {
            0x11 => Some("run".to_string()),
            0x13 => Some("Worker.java".to_string()),
            0x14 => Some(String::new()),
            _ => None,
        };
        let classes = |id: u64| (id == 0x70).then(|| "app.Worker".to_string());
        let ids = [0x100, 0x200, 0x300, 0x400, 0x500, 0x600, 0x700];
        let mut th = records.finish(&ids, strings, classes);
        let frame = |th: &Threads, node: u32| {
            let on = th.on_thread(node, sub::ROOT_JAVA_FRAME).unwrap();
            assert_eq!(on.thread, Some(0));
            on.frame.unwrap()
        };
        assert_eq!(frame(&th, 1), "app.Worker.run(Worker.java:42)");
        assert_eq!(frame(&th, 2), "app.Worker.run(Worker.java)");
        assert_eq!(frame(&th, 3), "app.Worker.run(Unknown Source)");
        assert_eq!(frame(&th, 4), "app.Worker.run(Native Method)");
        // A JNI local's frame is named; a JNI monitor's is not.
        let local = th.on_thread(5, sub::ROOT_JNI_LOCAL).unwrap();
        assert_eq!(
            local.frame.as_deref(),
            Some("app.Worker.run(Worker.java:42)")
        );
        let monitor = th.on_thread(6, sub::ROOT_JNI_MONITOR).unwrap();
        assert_eq!((monitor.thread, monitor.frame), (Some(0), None));
        th.rename_frames(|t| t.strip_prefix("app.Worker.").map(|m| format!("a.b.{m}")));
        assert_eq!(frame(&th, 1), "a.b.run(Worker.java:42)");
    }
}
