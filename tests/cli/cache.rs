//! The persistent fact cache and the run record: output with and without them is
//! byte-identical, a damaged cache is reported and rebuilt, an edited file is never
//! answered from either.

use crate::support::Project;

#[test]
fn output_with_and_without_the_cache_is_byte_identical_on_a_synthetic_monorepo() {
    let (p, edges) = crate::support::synthetic_monorepo(200);
    for args in [
        &["generate"][..],
        &["generate", "--provider", "github"],
        &["graph", "--format", "json"],
        &["generate", "--dry-run", "--format", "json"],
    ] {
        let without = p.run(&[args, &["--no-cache"]].concat());
        assert_eq!(without.code, 0, "{}", without.stderr);
        let _ = std::fs::remove_dir_all(p.path().join(".terraci"));
        let cold = p.run(args);
        assert!(p.path().join(".terraci/cache/facts.bin").exists());
        let warm = p.run(args);
        // The header names the command line, which differs by `--no-cache` only.
        let body = |s: &str| s.replace(" --no-cache", "");
        assert_eq!(body(&without.stdout), cold.stdout, "{args:?} cold");
        assert_eq!(cold.stdout, warm.stdout, "{args:?} warm");
        assert_eq!(cold.stderr, warm.stderr, "{args:?}");
    }
    let stats = p.run(&["graph", "--stats"]);
    assert!(
        stats.stdout.contains(&format!("edges:       {edges}")),
        "{}",
        stats.stdout
    );
}

#[test]
fn a_damaged_cache_is_ignored_with_a_notice_and_rebuilt() {
    let p = Project::fixture("example");
    let first = p.run(&["generate"]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    let cache = p.path().join(".terraci/cache/facts.bin");
    let bytes = std::fs::read(&cache).expect("cache written");
    for damaged in [
        bytes[..bytes.len() / 2].to_vec(),
        b"not a cache at all".to_vec(),
        {
            let mut b = bytes.clone();
            let mid = b.len() / 2;
            b[mid] ^= 0x55;
            b
        },
    ] {
        std::fs::write(&cache, damaged).expect("damage the cache");
        // The run record would answer without reading the facts at all.
        let _ = std::fs::remove_file(p.path().join(".terraci/cache/run.bin"));
        let out = p.run(&["generate"]);
        assert_eq!(out.stdout, first.stdout);
        assert!(
            out.stderr.contains("notice: ignoring the fact cache"),
            "{}",
            out.stderr
        );
        let _ = std::fs::remove_file(p.path().join(".terraci/cache/run.bin"));
        let again = p.run(&["generate"]);
        assert_eq!(again.stdout, first.stdout);
        assert!(
            !again.stderr.contains("notice"),
            "rebuilt: {}",
            again.stderr
        );
    }
}

#[test]
fn an_edited_file_is_never_answered_from_the_cache() {
    let p = Project::fixture("example");
    let before = p.run(&["graph", "--format", "list"]);
    let eks = "platform/stage/eu-central-1/eks/main.tf";
    let text = p.read(eks);
    // Same length, different bytes: only the content hash tells them apart.
    let edited = text.replace("}/vpc/terraform", "}/rds/terraform");
    assert_ne!(edited, text);
    p.write(eks, &edited);
    // Entries keep the stamps of files that had settled before the run began (50 ms on
    // this disk): settled for both runs below, both caches hold every stamp.
    std::thread::sleep(std::time::Duration::from_millis(200));
    let after = p.run(&["graph", "--format", "list"]);
    let fresh = p.run(&["graph", "--format", "list", "--no-cache"]);
    assert_ne!(after.stdout, before.stdout);
    assert_eq!(after.stdout, fresh.stdout);
    // The cache that run rewrote (every other file's entry copied from the old cache) is
    // the cache a first run writes for this tree, byte for byte.
    let cache = p.path().join(".terraci/cache/facts.bin");
    let rewritten = std::fs::read(&cache).expect("the cache rewritten");
    std::fs::remove_dir_all(p.path().join(".terraci/cache")).expect("drop the caches");
    let first = p.run(&["graph", "--format", "list"]);
    assert_eq!(first.stdout, fresh.stdout);
    assert!(std::fs::read(&cache).expect("the cache written") == rewritten);
}

#[test]
fn a_repeat_generate_is_replayed_and_an_edit_is_never_answered_from_it() {
    let p = Project::fixture("example");
    // A run records only files that had settled before it began (50 ms on this disk).
    std::thread::sleep(std::time::Duration::from_millis(200));
    let first = p.run(&["generate"]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    assert!(p.path().join(".terraci/cache/run.bin").exists());
    let again = p.run(&["generate"]);
    assert_eq!(again.code, 0);
    assert_eq!(again.stdout, first.stdout);
    assert_eq!(again.stderr, first.stderr);
    let eks = "platform/stage/eu-central-1/eks/main.tf";
    let text = p.read(eks);
    // Same length, written right after the record: only the change time tells.
    p.write(eks, text.replace("}/vpc/terraform", "}/rds/terraform"));
    let after = p.run(&["generate"]);
    let fresh = p.run(&["generate", "--no-cache"]);
    assert_ne!(after.stdout, first.stdout);
    assert_eq!(after.stdout, fresh.stdout.replace(" --no-cache", ""));
}

#[test]
fn no_cache_writes_nothing() {
    let p = Project::fixture("example");
    let out = p.run(&["generate", "--no-cache"]);
    assert_eq!(out.code, 0);
    assert!(!p.path().join(".terraci").exists());
}

#[test]
fn terraci_no_cache_takes_the_usual_boolean_spellings() {
    let p = Project::fixture("example");
    for value in ["1", "true", "yes", "on", "0", "false", "no", "off", ""] {
        let out = p.run_env(&["version"], &[("TERRACI_NO_CACHE", value)]);
        assert_eq!(out.code, 0, "TERRACI_NO_CACHE={value:?}: {}", out.stderr);
    }
    let cache = p.path().join(".terraci/cache");
    for value in ["1", "yes", "true"] {
        let out = p.run_env(&["generate"], &[("TERRACI_NO_CACHE", value)]);
        assert_eq!(out.code, 0, "{}", out.stderr);
        assert!(!cache.exists(), "TERRACI_NO_CACHE={value} wrote the cache");
    }
    for value in ["0", ""] {
        let out = p.run_env(&["generate"], &[("TERRACI_NO_CACHE", value)]);
        assert_eq!(out.code, 0, "{}", out.stderr);
        assert!(cache.exists(), "TERRACI_NO_CACHE={value:?} kept no cache");
    }
}

#[test]
fn with_both_cache_files_damaged_the_first_run_rebuilds_both() {
    let p = Project::fixture("example");
    let first = p.run(&["generate"]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    let dir = p.path().join(".terraci/cache");
    // The record is written only once the files it stamps have settled.
    std::thread::sleep(std::time::Duration::from_millis(100));
    let second = p.run(&["generate"]);
    assert_eq!(second.code, 0, "{}", second.stderr);
    assert!(dir.join("run.bin").exists(), "no run record to damage");
    std::fs::write(dir.join("run.bin"), "junk").expect("damage the record");
    std::fs::write(dir.join("facts.bin"), "junk").expect("damage the cache");
    let damaged = p.run(&["generate"]);
    assert_eq!(damaged.stdout, first.stdout);
    assert!(
        damaged.stderr.contains("ignoring the run record")
            && damaged.stderr.contains("ignoring the fact cache"),
        "{}",
        damaged.stderr
    );
    assert_ne!(
        std::fs::read(dir.join("run.bin")).expect("run record"),
        b"junk",
        "the run said it rebuilt the run record"
    );
    std::thread::sleep(std::time::Duration::from_millis(100));
    let again = p.run(&["generate"]);
    assert_eq!(again.stdout, first.stdout);
    assert_eq!(again.stderr, "", "the notices are not replayed");
}
