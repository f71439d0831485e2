//! Library leaks (issue 42, item 6): leaks that live in the Android framework or in a device
//! maker's build, not in the app. A developer cannot fix them in the app's code (at most work
//! around them), so the report shows them apart: a `gcPaths[]` entry whose path goes through a
//! known reference carries `libraryLeak` (the pattern, what is known of it, where it is
//! tracked), and the text, the page and `/leaks` list such groups after the app's own.
//!
//! The knowledge is data, [`KNOWN`]: a reference (an instance or static field of a class, or a
//! JNI global reference to an instance of a class), the API levels it leaks on (`Build.VERSION
//! .SDK_INT`, both ends included), the device maker whose build has it (`Build.MANUFACTURER`,
//! compared without case; `None`: every build), a description in this project's words, and where
//! the bug is tracked. The facts come from public sources: AOSP's bug trackers and commits, and
//! the lists of known framework leaks that leak detectors publish.
//!
//! Matching ([`find`]): a path is a library leak if one of its references matches an entry that
//! applies to the device. The device is the incident's `runningInfo` (`apiLevel`,
//! `manufacturer`, which the agent records); without an API level there (a dump analysed on its
//! own), the dump's own `android.os.Build$VERSION.SDK_INT` (a static int, kept by every strip;
//! `report::device`). An API level still unknown is not checked, while an entry of one maker's
//! build needs that maker named. The reference names are the dump's own field names, kept by every
//! strip (a stripped dump gives the same answer); obfuscated names (R8) match no entry until
//! they are mapped back.
//!
//! Unlike LeakCanary, the shortest-path search does not avoid these references first: a path
//! through one of them is reported as a library leak even where a longer path of the app's own
//! holds the object too. The group's trace still shows the whole path.
#![forbid(unsafe_code)]

use crate::report::PathItem;
use serde::{Deserialize, Serialize};

/// How a known reference holds what leaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Held {
    /// An instance field, as declared by `class` (also on instances of its subclasses).
    Field,
    /// A static field of `class`.
    Static,
    /// A JNI global reference (native code) to an instance of `class`: `field` is empty.
    JniGlobal,
}

/// One known library leak.
#[derive(Clone, Copy, Debug)]
pub struct Known {
    pub class: &'static str,
    pub field: &'static str,
    pub held: Held,
    /// API levels, both included.
    pub api: (u32, u32),
    /// `Build.MANUFACTURER` of the builds that have it; `None`: all.
    pub manufacturer: Option<&'static str>,
    pub description: &'static str,
    /// Where the bug is tracked or was fixed, if public; empty if not.
    pub tracked: &'static str,
}

/// `gcPaths[i].libraryLeak`: the known reference a path goes through.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", default)]
pub struct LibraryLeak {
    /// `Class.field` (a static or instance field), or `JNI global Class`.
    pub pattern: String,
    pub description: String,
    /// Where the bug is tracked, if known.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub tracked: String,
    /// The API levels it is known on (`[min, max]`) and the maker whose build has it.
    pub api_levels: [u32; 2],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub manufacturer: Option<String>,
}

/// The device a dump comes from, as far as it is known.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Device {
    /// `Build.VERSION.SDK_INT`; `None` when unknown.
    pub api: Option<u32>,
    /// `Build.MANUFACTURER`; `None` when unknown.
    pub manufacturer: Option<String>,
}

impl Device {
    /// From the incident's running info (`apiLevel`, `manufacturer`); 0 and "" are unknown.
    pub fn from_running_info(info: &serde_json::Value) -> Device {
        let api = info
            .get("apiLevel")
            .and_then(|v| v.as_u64())
            .filter(|&a| a > 0 && a < 10_000)
            .map(|a| a as u32);
        let manufacturer = info
            .get("manufacturer")
            .and_then(|v| v.as_str())
            .map(str::trim)
            .filter(|m| !m.is_empty())
            .map(|m| m.chars().take(64).collect());
        Device { api, manufacturer }
    }
}

const ANY: u32 = u32::MAX;

impl Known {
    /// Whether the entry applies to `d` (see the module documentation).
    pub fn applies(&self, d: &Device) -> bool {
        let api = d.api.is_none_or(|a| self.api.0 <= a && a <= self.api.1);
        let maker = match (self.manufacturer, &d.manufacturer) {
            (None, _) => true,
            (Some(m), Some(dm)) => m.eq_ignore_ascii_case(dm),
            (Some(_), None) => false,
        };
        api && maker
    }

    fn pattern(&self) -> String {
        match self.held {
            Held::JniGlobal => format!("JNI global {}", self.class),
            _ => format!("{}.{}", self.class, self.field),
        }
    }

    fn report(&self) -> LibraryLeak {
        LibraryLeak {
            pattern: self.pattern(),
            description: self.description.into(),
            tracked: self.tracked.into(),
            api_levels: [self.api.0, self.api.1],
            manufacturer: self.manufacturer.map(String::from),
        }
    }
}

/// The first entry of [`KNOWN`] that applies to `device` and that the path `items` (KOOM's
/// `path[]`) goes through; `root_kind` and `first_class` are the trace's (a JNI global's
/// object).
pub fn find(
    items: &[PathItem],
    root_kind: &str,
    first_class: &str,
    device: &Device,
) -> Option<LibraryLeak> {
    KNOWN
        .iter()
        .filter(|k| k.applies(device))
        .find(|k| match k.held {
            Held::JniGlobal => root_kind == "JNI global" && first_class == k.class,
            Held::Field | Held::Static => {
                let ty = if k.held == Held::Field {
                    "INSTANCE_FIELD"
                } else {
                    "STATIC_FIELD"
                };
                items.iter().any(|it| {
                    it.reference_type == ty
                        && it.declared_class == k.class
                        && it.reference.rsplit('.').next() == Some(k.field)
                })
            }
        })
        .map(Known::report)
}

const IMM: &str = "android.view.inputmethod.InputMethodManager";
const IMM_VIEW: &str = "The input method manager keeps the view that last took keyboard input \
    after it is detached, until another view asks for input.";
const SAMSUNG: Option<&str> = Some("samsung");
const HUAWEI: Option<&str> = Some("HUAWEI");
const LG: Option<&str> = Some("LGE");

/// Shorthands for the table.
const fn field(
    class: &'static str,
    field: &'static str,
    api: (u32, u32),
    description: &'static str,
    tracked: &'static str,
) -> Known {
    Known {
        class,
        field,
        held: Held::Field,
        api,
        manufacturer: None,
        description,
        tracked,
    }
}

const fn stat(
    class: &'static str,
    field: &'static str,
    api: (u32, u32),
    description: &'static str,
    tracked: &'static str,
) -> Known {
    Known {
        held: Held::Static,
        ..self::field(class, field, api, description, tracked)
    }
}

const fn jni(class: &'static str, api: (u32, u32), description: &'static str) -> Known {
    Known {
        held: Held::JniGlobal,
        ..self::field(class, "", api, description, "")
    }
}

const fn maker(k: Known, m: Option<&'static str>) -> Known {
    Known {
        manufacturer: m,
        ..k
    }
}

/// The known library leaks (see the module documentation).
pub const KNOWN: &[Known] = &[
    // --- Android (AOSP).
    field(IMM, "mNextServedView", (15, 33), IMM_VIEW, "https://code.google.com/p/android/issues/detail?id=171190"),
    field(IMM, "mServedView", (15, 28), IMM_VIEW, "https://code.google.com/p/android/issues/detail?id=171190"),
    field(IMM, "mServedInputConnection", (15, 27), IMM_VIEW, "https://code.google.com/p/android/issues/detail?id=171190"),
    field(IMM, "mCurRootView", (15, 28), "The input method manager (a process-wide singleton) keeps the root view of a window after its Activity is destroyed.", ""),
    field(IMM, "mImeInsetsConsumer", (31, ANY), "The input method manager does not clear its insets consumer when the Activity is destroyed.", ""),
    field("android.app.ActivityThread", "mNewActivities", (19, 33), "A new Activity stays listed in ActivityThread until the main thread next goes idle.", "https://issuetracker.google.com/issues/258390457"),
    field("android.widget.Editor$SpanController", "this$0", (0, 19), "Before KitKat, a TextView's saved state copied a span that points back to the EditText, and with it the view hierarchy.", ""),
    field("android.widget.Editor$EasyEditSpanController", "this$0", (0, 19), "Before KitKat, a TextView's saved state copied a span that points back to the EditText, and with it the view hierarchy.", ""),
    field("android.os.Message", "obj", (0, 30), "An idle HandlerThread keeps the last message it handled in a local variable; a dialog's template messages are never recycled and hold its listeners. Fixed in Android 12.", "https://issuetracker.google.com/issues/146144484"),
    field("android.hardware.input.InputManager", "mLateInitContext", (33, 33), "The InputManager singleton keeps the context it was first initialised with, an Activity.", ""),
    field("android.animation.LayoutTransition$1", "val$parent", (14, 22), "A layout transition's pre-draw listener keeps the parent ViewGroup until the window is destroyed.", "https://code.google.com/p/android/issues/detail?id=171830"),
    field("android.view.textservice.SpellCheckerSession$1", "this$0", (16, 24), "A spell checker session closed before its service connected keeps its handler, and the Activity.", "https://code.google.com/p/android/issues/detail?id=172542"),
    field("android.widget.SpellChecker$1", "this$0", (22, 22), "The spell checker's queued runnable keeps a detached view of a destroyed Activity.", ""),
    field("android.media.projection.MediaProjection$MediaProjectionCallback", "this$0", (22, 28), "Another process holds the media projection callback, which holds a MediaProjection created with an Activity.", ""),
    field("android.speech.SpeechRecognizer$InternalListener", "this$0", (0, 20), "Before Android 5, the recognizer's listener was an inner class and kept the recognizer and its Activity.", ""),
    field("android.accounts.AccountManager$AmsTask$Response", "this$1", (0, 27), "Native code holds the account manager task's response stub, and the task keeps the Activity it may start another from.", "https://code.google.com/p/android/issues/detail?id=173689"),
    field("android.media.MediaScannerConnection", "mContext", (0, 22), "MediaScannerConnection.scanFile() with an Activity: the service may stay connected after the Activity is destroyed.", "https://code.google.com/p/android/issues/detail?id=173788"),
    field("android.os.UserManager", "mContext", (18, 25), "UserManager caches its first instance, made with the context of whoever asked first (often an Activity).", "https://code.google.com/p/android/issues/detail?id=173789"),
    field("android.appwidget.AppWidgetHost$Callbacks", "this$0", (0, 21), "Native code holds the widget host's callbacks stub, which kept the host and its context.", ""),
    field("android.media.AudioManager$1", "this$0", (0, 22), "Before Android 6, AudioManager kept the context it was given (an Activity, for a VideoView) in a focus listener.", "https://code.google.com/p/android/issues/detail?id=152173"),
    field("android.widget.Editor$Blink", "this$0", (0, 23), "The cursor blink of an EditText in a dismissed dialog posts a delayed message that keeps the Activity.", "https://code.google.com/p/android/issues/detail?id=188551"),
    stat("android.net.ConnectivityManager", "sInstance", (0, 23), "The first ConnectivityManager is kept in a static, with the context it was made with (an Activity if asked from one).", "https://code.google.com/p/android/issues/detail?id=198852"),
    field("android.view.accessibility.AccessibilityNodeInfo", "mOriginalText", (26, 27), "Pooled accessibility node infos keep their original text, whose spans reach the view hierarchy.", ""),
    field("android.app.assist.AssistStructure$ViewNodeText", "mText", (24, ANY), "The assist structure (the assistant, autofill) keeps the screen's text spans, which reach the view hierarchy.", ""),
    field("android.hardware.biometrics.BiometricPrompt", "mFingerprintManager", (28, 28), "BiometricPrompt keeps a FingerprintManager that keeps a destroyed Activity.", ""),
    field("android.view.ViewGroup$ViewLocationHolder", "mRoot", (28, 28), "In Android 9 the pooled ViewLocationHolder does not clear mRoot.", "https://issuetracker.google.com/issues/112792715"),
    field("android.view.accessibility.AccessibilityNodeIdManager", "mIdsToViews", (28, 29), "A view detached before it was attached stays in the accessibility id table.", ""),
    field("android.speech.tts.TextToSpeech", "mContext", (24, 24), "TextToSpeech.shutdown() keeps its context, and another process keeps the TextToSpeech.", "https://issuetracker.google.com/issues/129250419"),
    field("android.speech.tts.TtsEngines", "mContext", (24, 24), "TextToSpeech.shutdown() keeps its context, and another process keeps the TextToSpeech.", "https://issuetracker.google.com/issues/129250419"),
    field("android.app.ApplicationPackageManager$HasSystemFeatureQuery", "this$0", (29, 29), "In an Android 11 preview the package manager's feature query cache was an inner class that kept the package manager and its context.", ""),
    field("android.view.ViewGroup", "mPreSortedChildren", (30, 30), "ViewGroup's temporary list of sorted children is not cleared after use.", "https://issuetracker.google.com/issues/178029590"),
    field("android.view.ViewGroup", "mCurrentDragChild", (29, 30), "ViewGroup keeps the last dragged child after it is detached.", "https://issuetracker.google.com/issues/170276524"),
    field("android.app.ActivityTransitionState", "mExitingToView", (28, 29), "A shared element transition keeps the view it used.", "https://issuetracker.google.com/issues/141132765"),
    field("android.animation.AnimationHandler", "mAnimatorRequestors", (33, 33), "The AnimationHandler singleton keeps a destroyed Activity's ViewRootImpl as a requestor.", "https://issuetracker.google.com/issues/258534826"),
    stat("android.media.session.MediaSessionLegacyHelper", "sInstance", (21, 21), "In Android 5.0 the legacy media session helper kept the first context it was given in a static singleton.", ""),
    stat("android.text.TextLine", "sCached", (0, 22), "TextLine's pool of three cached instances was not cleared on recycle, keeping spans and their views.", ""),
    jni("android.widget.Toast$TN", (0, ANY), "Native code holds a Toast's TN while the system shows it (an IPC)."),
    jni("android.view.inputmethod.InputMethodManager$ControlledInputConnectionWrapper", (0, ANY), "Native code holds the input connection wrapper."),
    jni("android.graphics.animation.RenderNodeAnimator", (31, 32), "A view detached during a ripple animation: native code never ends the animator, and keeps the view."),
    jni("android.media.PlayerBase$1", (24, 27), "PlayerBase's app-ops callback is an inner class that native code holds, and with it the player."),
    jni("android.app.AppOpsManager$3", (31, 32), "AppOpsManager's active-callback stub stays held by native code long after use (androidx.core 1.10 works around it)."),
    jni("android.app.job.JobService$1", (0, 23), "A JobService was kept by its binder stub."),
    jni("android.service.dreams.DreamService$1", (33, ANY), "A DreamService is kept by its binder stub."),
    // --- Device makers' builds.
    maker(field(IMM, "mLastSrvView", (23, 28), "HUAWEI's build adds mLastSrvView to the input method manager, which keeps the last served view.", ""), HUAWEI),
    maker(field(IMM, "mLastFocusView", (29, 29), "LG's build keeps the last focused view in the input method manager after it is detached.", ""), LG),
    maker(field(IMM, "mCurrentInputConnection", (28, 30), "Samsung's build keeps the input connection after the Activity is destroyed.", ""), SAMSUNG),
    maker(field("android.sec.clipboard.ClipboardUIManager", "mContext", (19, 21), "Samsung's clipboard UI singleton keeps the first context it was given.", ""), SAMSUNG),
    maker(field("com.samsung.android.emergencymode.SemEmergencyManager", "mContext", (19, 24), "Samsung's emergency mode singleton keeps a window's context.", ""), SAMSUNG),
    maker(stat("android.widget.TextView", "mLastHoveredView", (19, 31), "Samsung's build adds a static to TextView that keeps the last hovered view.", ""), SAMSUNG),
    maker(stat("android.media.AudioManager", "mContext_static", (19, 19), "Samsung's build adds a static context to AudioManager, an Activity.", ""), SAMSUNG),
    maker(stat("android.app.ActivityManager", "mContext", (22, 23), "Samsung's build adds a static context to ActivityManager, an Activity.", ""), SAMSUNG),
    maker(stat("android.widget.TextView", "mTargetView", (27, 27), "Samsung's build adds a static to TextView that keeps detached views.", ""), SAMSUNG),
    maker(field("com.android.internal.policy.MultiWindowDecorSupport", "mWindow", (26, 29), "Samsung's multi-window decor support keeps a destroyed Activity's window.", ""), SAMSUNG),
    maker(stat("android.gestureboost.GestureBoostManager", "mContext", (24, 25), "HUAWEI's gesture boost singleton keeps an Activity in a static.", ""), HUAWEI),
    maker(stat("android.widget.BubblePopupHelper", "sHelper", (19, 22), "LG's static helper for text bubble popups keeps the last focused view.", ""), LG),
    maker(field("com.lge.systemservice.core.LGContext", "mContext", (21, 21), "LG's LGContext singleton keeps an Activity.", ""), LG),
    maker(field("com.lge.systemservice.core.SmartCoverManager", "mContext", (27, 27), "LG's smart cover callback, held by native code, keeps an Activity through SmartCoverManager.", ""), LG),
];

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_device_is_read_from_the_running_info_and_unknown_values_are_none() {
        let d = Device::from_running_info(&json!({"apiLevel": 30, "manufacturer": " Google "}));
        assert_eq!(
            (d.api, d.manufacturer.as_deref()),
            (Some(30), Some("Google"))
        );
        for info in [
            json!({"apiLevel": 0, "manufacturer": ""}),
            json!({"apiLevel": "30", "manufacturer": 7}),
            json!({"apiLevel": -1}),
            json!({"apiLevel": 1e12}),
            json!(null),
        ] {
            assert_eq!(
                Device::from_running_info(&info),
                Device::default(),
                "{info}"
            );
        }
        let long = "m".repeat(1000);
        let d = Device::from_running_info(&json!({"manufacturer": long}));
        assert_eq!(d.manufacturer.map(|m| m.len()), Some(64));
    }

    #[test]
    fn every_entry_is_well_formed_and_unique() {
        let mut seen = std::collections::HashSet::new();
        for k in KNOWN {
            assert!(!k.class.is_empty() && !k.description.is_empty(), "{k:?}");
            assert!(k.api.0 <= k.api.1, "{k:?}");
            assert_eq!(k.field.is_empty(), k.held == Held::JniGlobal, "{k:?}");
            assert!(
                k.tracked.is_empty() || k.tracked.starts_with("https://"),
                "{k:?}"
            );
            assert!(seen.insert(k.pattern()), "twice: {k:?}");
        }
        assert!(KNOWN.len() >= 50, "{}", KNOWN.len());
    }

    fn item(reference: &str, ty: &str, declared: &str) -> PathItem {
        PathItem {
            reference: reference.into(),
            reference_type: ty.into(),
            declared_class: declared.into(),
        }
    }

    #[test]
    fn a_reference_matches_by_its_kind_declaring_class_and_name() {
        let any = Device::default();
        let toast = find(&[], "JNI global", "android.widget.Toast$TN", &any);
        assert_eq!(
            toast.map(|l| l.pattern),
            Some("JNI global android.widget.Toast$TN".to_string())
        );
        // The same class held another way is no match.
        assert_eq!(
            find(&[], "static field", "android.widget.Toast$TN", &any),
            None
        );
        let obj = item(
            "android.os.Message.obj",
            "INSTANCE_FIELD",
            "android.os.Message",
        );
        assert!(find(std::slice::from_ref(&obj), "thread", "x", &any).is_some());
        // As a static, or declared by another class, or another field: no match.
        for other in [
            item(
                "android.os.Message.obj",
                "STATIC_FIELD",
                "android.os.Message",
            ),
            item("a.MyMessage.obj", "INSTANCE_FIELD", "a.MyMessage"),
            item(
                "android.os.Message.objs",
                "INSTANCE_FIELD",
                "android.os.Message",
            ),
        ] {
            assert_eq!(
                find(std::slice::from_ref(&other), "thread", "x", &any),
                None,
                "{other:?}"
            );
        }
        // Message.obj leaks up to API 30.
        let on = |api| Device {
            api: Some(api),
            manufacturer: None,
        };
        assert!(find(std::slice::from_ref(&obj), "thread", "x", &on(30)).is_some());
        assert_eq!(find(&[obj], "thread", "x", &on(31)), None);
    }

    #[test]
    fn an_api_level_is_known_from_1_to_9999() {
        let api = |a: u64| Device::from_running_info(&json!({ "apiLevel": a })).api;
        assert_eq!(
            [0, 1, 34, 9_999, 10_000].map(api),
            [None, Some(1), Some(34), Some(9_999), None]
        );
    }
}
