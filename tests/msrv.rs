//! The MSRV check of CI (`.ci/msrv.py`) catches a dependency that needs a newer Rust than the
//! workspace declares, and members that disagree. Runs the script on made-up `cargo metadata`
//! output; skipped with a note when python3 is not installed.

use std::path::PathBuf;
use std::process::Command;

use serde_json::json;

fn python() -> Option<&'static str> {
    let ok = Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        println!("skipped: python3 not found (apt-get install -y python3)");
    }
    ok.then_some("python3")
}

/// Metadata of a workspace of `members` (name, rust-version) and `deps` (name, rust-version).
fn metadata(members: &[(&str, Option<&str>)], deps: &[(&str, Option<&str>)]) -> serde_json::Value {
    let pkg = |name: &str, rv: Option<&str>| json!({"id": format!("{name} 1.0.0"), "name": name, "version": "1.0.0", "rust_version": rv});
    json!({
        "workspace_members": members.iter().map(|(n, _)| format!("{n} 1.0.0")).collect::<Vec<_>>(),
        "packages": members.iter().chain(deps).map(|&(n, rv)| pkg(n, rv)).collect::<Vec<_>>(),
    })
}

/// Runs the check on `meta`; returns its exit status and output.
fn run(test: &str, meta: &serde_json::Value) -> (i32, String) {
    let py = python().expect("checked by the caller");
    // Removed when dropped, at the return and also when a panic unwinds.
    let dir = tempfile::Builder::new()
        .prefix(&format!("lro-msrv-{test}-"))
        .tempdir()
        .expect("temp dir");
    let file = dir.path().join("metadata.json");
    std::fs::write(&file, meta.to_string()).expect("write metadata");
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".ci/msrv.py");
    let out = Command::new(py)
        .arg(&script)
        .arg("--metadata")
        .arg(&file)
        .output()
        .expect("run the check");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn a_dependency_above_the_declared_version_fails_the_check() {
    if python().is_none() {
        return;
    }
    let members = [("lro", Some("1.91")), ("lro-core", Some("1.91"))];
    let (code, out) = run(
        "ok",
        &metadata(&members, &[("smoltcp", Some("1.91")), ("old", None)]),
    );
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("declared 1.91") && out.contains("smoltcp"),
        "{out}"
    );

    let (code, out) = run(
        "above",
        &metadata(
            &members,
            &[("smoltcp", Some("1.91")), ("newer", Some("1.92.1"))],
        ),
    );
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("newer 1.0.0 needs Rust 1.92.1"), "{out}");

    // A patch level counts: 1.91.1 is above 1.91.
    let (code, out) = run("patch", &metadata(&members, &[("x", Some("1.91.1"))]));
    assert_eq!(code, 1, "{out}");
}

#[test]
fn members_must_declare_one_version() {
    if python().is_none() {
        return;
    }
    let (code, out) = run(
        "members",
        &metadata(&[("lro", Some("1.91")), ("lro-core", Some("1.88"))], &[]),
    );
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("different rust-versions"), "{out}");
    let (code, out) = run(
        "missing",
        &metadata(&[("lro", Some("1.91")), ("lro-core", None)], &[]),
    );
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("lro-core declares no rust-version"), "{out}");
}
