//! The driver's rooms (the top-level modules of `driver/src`) stand on floors, and a room
//! uses only rooms on the floors below it: read from `src` as the compiler would (every
//! `crate::room` path outside comments and test code), so the import graph has no circle
//! and the house reads from the bottom up. `docs/architecture.md` draws the same floors.
//!
//! A new room goes on the lowest floor above everything it uses. An import from a lower
//! room to a higher one is an error unless listed in `UPWARD` with the reason; at most
//! one may be.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The floors, bottom first.
const FLOORS: &[&[&str]] = &[
    // The exception classes a refusal names: the expression language raises them.
    &["refusal"],
    // Leaves: values and helpers that use no other room but the refusals.
    &[
        "cgroup",
        "config",
        "expr",
        "human",
        "invocation",
        "logs",
        "models",
        "npy",
        "package",
        "runs",
        "svg",
    ],
    // The job file (the public contract), and the local Lambda-compatible endpoint.
    &["job", "local"],
    // What a job means: the array graph, the cost model, a deployment's defaults.
    &["cost", "graph", "infra"],
    // The planning half: block work, then its placement into batches.
    &["tasks"],
    &["sched"],
    // The run half, bottom up: sending batches; the backend a run invokes and what a run
    // measured; the library's typed errors; checking and planning a job; the stage runner.
    &["dispatch"],
    &["backend", "report"],
    &["error"],
    &["plan"],
    &["stage"],
    // What goes through the stage runner: the CSV count, the fits, the exports; the bar;
    // the run timeline (its lanes and memory panel drawn for the plan chart too).
    &["csv_count", "export", "iterate", "progress", "timeline"],
    // The one executor: every front end's computation (masks settled, fits, the main
    // stage) runs here.
    &["engine"],
    // A run's orchestration; the plan's pictures; stored arrays' commands.
    &["arrays", "planview", "run"],
    // The front ends.
    &["api", "cli"],
];

/// Imports from a room to one on its floor or above, each `(from, to, why)`.
const UPWARD: &[(&str, &str, &str)] = &[];

/// The `.rs` files under `dir`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("driver/src") {
        let p = e.expect("entry").path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The room a file belongs to: its first path component under `src` (`sched/lshs.rs` is
/// in `sched`); `None` for `lib.rs` and `main.rs`.
fn room(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).expect("under src");
    let first = rel.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (!matches!(name, "lib" | "main")).then(|| name.to_string())
}

/// A file's code without its comment lines and its `#[cfg(test)]` items (tests may use
/// any room); and the files its `#[cfg(test)] mod NAME;` declarations make test-only.
fn code(text: &str) -> (String, Vec<String>) {
    let mut out = String::new();
    let mut test_files = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let t = line.trim_start();
        if t.starts_with("//") {
            continue;
        }
        if t.starts_with("#[cfg(test)]") {
            // The item after it: `mod name;` (a file of its own) or a braced item.
            let mut depth = 0i64;
            let mut opened = false;
            for next in lines.by_ref() {
                let n = next.trim_start();
                if !opened && n.starts_with("mod ") && n.ends_with(';') {
                    let name = n["mod ".len()..n.len() - 1].trim();
                    test_files.push(name.to_string());
                    break;
                }
                if n.starts_with("//") {
                    continue;
                }
                for c in next.chars() {
                    match c {
                        '{' => {
                            depth += 1;
                            opened = true;
                        }
                        '}' => depth -= 1,
                        _ => {}
                    }
                }
                if opened && depth <= 0 {
                    break;
                }
            }
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    (out, test_files)
}

/// The rooms `code` names: `crate::room` paths, and `use crate::{a, b::c}` groups.
fn uses(code: &str, rooms: &BTreeSet<String>) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        let ident: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if !ident.is_empty() {
            found.insert(ident);
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            // Top-level names of the group, up to its closing brace.
            let (mut depth, mut item_start) = (0, true);
            let mut name = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => item_start = true,
                    c if item_start && (c.is_alphanumeric() || c == '_') => name.push(c),
                    _ if item_start && !name.is_empty() => {
                        found.insert(std::mem::take(&mut name));
                        item_start = false;
                    }
                    _ => {}
                }
            }
            if !name.is_empty() {
                found.insert(name);
            }
        }
    }
    found.retain(|r| rooms.contains(r));
    found
}

/// Every room's imports of other rooms.
fn imports() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    files.sort();
    let rooms: BTreeSet<String> = files.iter().filter_map(|f| room(&src, f)).collect();
    let mut parsed = Vec::new();
    let mut test_only = BTreeSet::new();
    for f in &files {
        let text = std::fs::read_to_string(f).expect("a source file");
        let (code, tests) = code(&text);
        let dir = f.parent().expect("a folder");
        for t in tests {
            test_only.insert(dir.join(format!("{t}.rs")));
        }
        parsed.push((f.clone(), code));
    }
    let mut out: BTreeMap<String, BTreeSet<String>> =
        rooms.iter().map(|r| (r.clone(), BTreeSet::new())).collect();
    for (f, code) in parsed {
        let Some(r) = room(&src, &f) else { continue };
        if test_only.contains(&f) {
            continue;
        }
        let used = uses(&code, &rooms);
        out.get_mut(&r)
            .expect("a room")
            .extend(used.into_iter().filter(|u| *u != r));
    }
    out
}

#[test]
fn rooms_import_only_the_floors_below() {
    let imports = imports();
    let floor: BTreeMap<&str, usize> = FLOORS
        .iter()
        .enumerate()
        .flat_map(|(i, f)| f.iter().map(move |r| (*r, i)))
        .collect();
    let unplaced: Vec<&String> = imports
        .keys()
        .filter(|r| !floor.contains_key(r.as_str()))
        .collect();
    assert!(
        unplaced.is_empty(),
        "rooms on no floor (add each to FLOORS, on the lowest floor above what it uses): {unplaced:?}"
    );
    let gone: Vec<&&str> = floor
        .keys()
        .filter(|r| !imports.contains_key(**r))
        .collect();
    assert!(
        gone.is_empty(),
        "FLOORS names rooms that do not exist: {gone:?}"
    );
    assert!(UPWARD.len() <= 1, "at most one import may go up a floor");
    let mut wrong = Vec::new();
    for (from, tos) in &imports {
        for to in tos {
            let (f, t) = (floor[from.as_str()], floor[to.as_str()]);
            let allowed = UPWARD.iter().any(|(a, b, _)| a == from && b == to);
            if t >= f && !allowed {
                wrong.push(format!("{from} (floor {f}) uses {to} (floor {t})"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports that do not go down a floor:\n  {}",
        wrong.join("\n  ")
    );
    for (from, to, why) in UPWARD {
        assert!(
            imports[*from].contains(*to),
            "UPWARD lists {from} -> {to}, which is no longer imported ({why}): remove it"
        );
    }
}

/// The parser finds what it must: grouped uses, test code left out.
#[test]
fn the_parser_reads_uses_and_leaves_tests_out() {
    let rooms: BTreeSet<String> = ["a", "b", "c", "d"].map(String::from).into();
    let src = "use crate::{a::X, b};\n// crate::c in a comment\nfn f() { crate::d::g() }\n\
               #[cfg(test)]\nmod tests {\n    use crate::c;\n    fn h() {}\n}\nuse crate::b;\n";
    let (text, tests) = code(src);
    assert!(tests.is_empty());
    let found = uses(&text, &rooms);
    assert_eq!(found, ["a", "b", "d"].map(String::from).into());
    let (_, tests) = code("#[cfg(test)]\nmod tests;\nuse crate::a;\n");
    assert_eq!(tests, vec!["tests".to_string()]);
}

/// `docs/architecture.md` draws the floors as `FLOORS` has them (a line per floor, top
/// first: its number, its rooms, then three spaces or more and what the floor is for).
#[test]
fn the_architecture_page_draws_these_floors() {
    let page = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/architecture.md");
    let text = std::fs::read_to_string(&page).expect("docs/architecture.md");
    let mut drawn: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    for line in text.lines() {
        let head = line.trim_start();
        let Some(rooms) = head.split("   ").next() else {
            continue;
        };
        let mut words = rooms.split_whitespace();
        let Some(Ok(n)) = words.next().map(str::parse::<usize>) else {
            continue;
        };
        let rooms: Vec<String> = words.map(String::from).collect();
        if !rooms.is_empty() && line.starts_with(' ') {
            drawn.insert(n, rooms);
        }
    }
    let want: BTreeMap<usize, Vec<String>> = FLOORS
        .iter()
        .enumerate()
        .map(|(i, f)| (i, f.iter().map(|r| r.to_string()).collect()))
        .collect();
    assert_eq!(
        drawn, want,
        "docs/architecture.md's floors differ from FLOORS"
    );
}

/// A library user who builds without the default features compiles neither the command
/// line's clap nor the local endpoint's axum.
#[test]
fn the_library_alone_has_no_cli_or_local_endpoint_dependencies() {
    let out = std::process::Command::new(env!("CARGO"))
        .args([
            "tree",
            "-p",
            "nums-cloud",
            "--no-default-features",
            "-e",
            "normal",
            "--offline",
        ])
        .args(["--prefix", "none", "--format", "{p}"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tree = String::from_utf8_lossy(&out.stdout);
    assert!(tree.contains("nums-layout"), "{tree}");
    for name in ["clap ", "clap_complete ", "axum "] {
        assert!(
            !tree.lines().any(|l| l.starts_with(name)),
            "{name}in:\n{tree}"
        );
    }
}
