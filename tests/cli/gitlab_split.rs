//! A GitLab pipeline over the instance's limits, written with `-o FILE`, is split into a
//! parent and child pipelines beside FILE (`<stem>.d/child-<n>.yml`), each under the
//! limits, keeping every order the whole pipeline's `needs` give.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::support::{synthetic_monorepo, Project};

const OUTPUT: &str = "ci/generated-pipeline.yml";
const CHILDREN: &str = "ci/generated-pipeline.d";

/// Writes `.terraci.yaml` with these `extensions.gitlab` keys (each line indented by 4).
pub(crate) fn configure(p: &Project, gitlab_keys: &str) {
    p.write(
        ".terraci.yaml",
        format!("extensions:\n  gitlab:\n{gitlab_keys}"),
    );
}

/// The top-level entries of a pipeline, parsed.
fn entries(text: &str) -> serde_yaml::Mapping {
    match serde_yaml::from_str(text).expect("YAML") {
        serde_yaml::Value::Mapping(m) => m,
        other => panic!("not a mapping: {other:?}"),
    }
}

/// The names a job `needs`.
fn needs(job: &serde_yaml::Value) -> Vec<String> {
    job["needs"]
        .as_sequence()
        .into_iter()
        .flatten()
        .map(|n| {
            n["job"]
                .as_str()
                .or(n.as_str())
                .expect("a job name")
                .to_owned()
        })
        .collect()
}

/// A split as written: the parent's triggers (trigger job -> the child file it includes
/// and the triggers it waits for) and each child's entries, by file name.
pub(crate) struct Split {
    pub(crate) triggers: BTreeMap<String, (String, Vec<String>)>,
    pub(crate) children: BTreeMap<String, serde_yaml::Mapping>,
    pub(crate) texts: BTreeMap<String, String>,
}

impl Split {
    /// The trigger of the child that holds `job`.
    fn trigger_of(&self, job: &str) -> Option<&str> {
        let file = self
            .children
            .iter()
            .find(|(_, entries)| entries.contains_key(job))?
            .0;
        self.triggers
            .iter()
            .find(|(_, (f, _))| f == file)
            .map(|(name, _)| name.as_str())
    }

    /// Whether the trigger `later` waits, directly or not, for `earlier`.
    fn waits_for(&self, later: &str, earlier: &str) -> bool {
        let mut todo = vec![later.to_owned()];
        let mut seen = BTreeSet::new();
        while let Some(t) = todo.pop() {
            if !seen.insert(t.clone()) {
                continue;
            }
            let (_, after) = &self.triggers[&t];
            if after.iter().any(|a| a == earlier) {
                return true;
            }
            todo.extend(after.iter().cloned());
        }
        false
    }
}

/// Reads the split `generate -o OUTPUT` wrote, checking what holds for any split: the
/// parent takes the children from the generate job and triggers each with `strategy:
/// depend`, every file it names exists, the directory holds no other child.
pub(crate) fn read_split(root: &Path, output: &str, children_dir: &str) -> Split {
    let parent = entries(&std::fs::read_to_string(root.join(output)).expect("the parent"));
    let publish = &parent["terraci-children"];
    assert_eq!(
        publish["needs"][0]["pipeline"].as_str(),
        Some("$PARENT_PIPELINE_ID"),
        "{publish:?}"
    );
    assert_eq!(
        publish["needs"][0]["job"].as_str(),
        Some("generate-pipeline")
    );
    assert_eq!(
        publish["artifacts"]["paths"][0].as_str(),
        Some(format!("{children_dir}/").as_str())
    );
    let mut split = Split {
        triggers: BTreeMap::new(),
        children: BTreeMap::new(),
        texts: BTreeMap::new(),
    };
    for (name, job) in &parent {
        let name = name.as_str().expect("a job name");
        if !name.starts_with("terraci-child-") {
            continue;
        }
        let trigger = &job["trigger"];
        assert_eq!(trigger["strategy"].as_str(), Some("depend"), "{name}");
        assert_eq!(
            trigger["include"][0]["job"].as_str(),
            Some("terraci-children")
        );
        let artifact = trigger["include"][0]["artifact"]
            .as_str()
            .expect("an artifact path");
        let file = artifact
            .strip_prefix(&format!("{children_dir}/"))
            .unwrap_or_else(|| panic!("{artifact} is not in {children_dir}"));
        let text = std::fs::read_to_string(root.join(artifact))
            .unwrap_or_else(|e| panic!("{name} triggers {artifact}, which is missing: {e}"));
        let needs = needs(job);
        assert_eq!(needs[0], "terraci-children", "{name}");
        // The child's summary job keeps a merge-request comment of its own.
        assert_eq!(
            job["variables"]["TERRACI_SUMMARY_PART"].as_str(),
            file.strip_suffix(".yml"),
            "{name}"
        );
        split
            .triggers
            .insert(name.to_owned(), (file.to_owned(), needs[1..].to_vec()));
        split.children.insert(file.to_owned(), entries(&text));
        split.texts.insert(file.to_owned(), text);
    }
    let on_disk: BTreeSet<String> = std::fs::read_dir(root.join(children_dir))
        .expect("the children's directory")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    let named: BTreeSet<String> = split.children.keys().cloned().collect();
    assert_eq!(on_disk, named, "the directory holds exactly the children");
    split
}

/// GitLab's measure of `text` by terraci's estimate, with the headroom the check keeps.
fn counted(text: &str) -> u64 {
    let size = terraci_render::gitlab_loaded_size(&[text]);
    size + (size * 7).div_ceil(100)
}

/// Checks `split` against the whole pipeline `whole` (the same plan, not split): every
/// child is under `limit`, every module job is in exactly one child, and every `needs`
/// of the whole pipeline holds, inside a child or by the triggers' order.
fn check_against_whole(split: &Split, whole: &str, limit: u64) {
    for (file, text) in &split.texts {
        assert!(
            counted(text) <= limit,
            "{file}: {} > {limit}",
            counted(text)
        );
    }
    let whole = entries(whole);
    let module_jobs: Vec<(&str, &serde_yaml::Value)> = whole
        .iter()
        .map(|(name, job)| (name.as_str().expect("a name"), job))
        .filter(|(name, _)| name.starts_with("plan-") || name.starts_with("apply-"))
        .collect();
    assert!(!module_jobs.is_empty());
    let mut placed = 0;
    for entries in split.children.values() {
        for name in entries.keys().filter_map(|k| k.as_str()) {
            if name.starts_with("plan-") || name.starts_with("apply-") {
                assert!(whole.contains_key(name), "{name} is not in the pipeline");
                placed += 1;
            }
        }
    }
    assert_eq!(
        placed,
        module_jobs.len(),
        "each module job in exactly one child"
    );
    for (name, job) in module_jobs {
        let mine = split.trigger_of(name).expect("in a child");
        let in_child = &split.children[&split.triggers[mine].0][name];
        for need in needs(job) {
            let theirs = split
                .trigger_of(&need)
                .expect("the needed job is in a child");
            if theirs == mine {
                assert!(
                    needs(in_child).contains(&need),
                    "{name} lost its need {need} inside {mine}"
                );
            } else {
                assert!(
                    split.waits_for(mine, theirs),
                    "{name} needs {need}, but {mine} does not wait for {theirs}"
                );
            }
        }
        // The plan and the apply of a module are in one child (the apply takes the
        // plan's artifact).
        if let Some(module) = name.strip_prefix("apply-") {
            assert_eq!(split.trigger_of(&format!("plan-{module}")), Some(mine));
        }
    }
}

/// The pipeline as one file, under a limit high enough.
fn whole_pipeline(p: &Project) -> String {
    configure(p, "    max_yaml_size_bytes: 100000000\n");
    let out = p.run(&["generate"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    out.stdout
}

#[test]
fn a_pipeline_over_the_limit_is_split_into_child_pipelines_that_keep_every_order() {
    let (p, _) = synthetic_monorepo(200);
    let whole = whole_pipeline(&p);
    // 150,000 bytes: two of the ten-module groups fit in a child. 50,000: none does, and
    // each is a chain of children.
    let mut counts = Vec::new();
    for limit in [150_000, 50_000] {
        configure(&p, &format!("    max_yaml_size_bytes: {limit}\n"));
        let out = p.run(&["generate", "-o", OUTPUT]);
        assert_eq!(out.code, 0, "{}", out.stderr);
        assert!(!out.stderr.contains("pipeline-limit"), "{}", out.stderr);
        let split = read_split(p.path(), OUTPUT, CHILDREN);
        let note = format!(
            "{OUTPUT} triggers {} child pipelines, written in {CHILDREN}/",
            split.children.len()
        );
        assert!(out.stderr.contains(&note), "{}", out.stderr);
        check_against_whole(&split, &whole, limit);
        assert!(counted(&p.read(OUTPUT)) <= limit);
        let chained = split.triggers.values().any(|(_, after)| !after.is_empty());
        assert_eq!(
            chained,
            limit == 50_000,
            "chains only under the small limit"
        );
        counts.push(split.children.len());
    }
    assert!(counts[0] > 1 && counts[1] > counts[0], "{counts:?}");

    // A bigger limit again: fewer children, and the earlier ones are gone.
    configure(&p, "    max_yaml_size_bytes: 150000\n");
    let out = p.run(&["generate", "-o", OUTPUT]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        read_split(p.path(), OUTPUT, CHILDREN).children.len(),
        counts[0]
    );
    // Under the limit as one file: no child is left, and a file terraci did not name
    // is not touched.
    p.write(&format!("{CHILDREN}/notes.yml"), "mine: true\n");
    p.remove(".terraci.yaml");
    let out = p.run(&["generate", "-o", OUTPUT]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(p.read(OUTPUT).contains("plan-svc0-dev-r0-m0:"));
    let left: Vec<String> = std::fs::read_dir(p.path().join(CHILDREN))
        .expect("the directory")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, ["notes.yml"]);
}

#[test]
fn without_splitting_or_without_a_file_over_the_limit_is_an_error() {
    let (p, _) = synthetic_monorepo(30);
    configure(
        &p,
        "    max_yaml_size_bytes: 60000\n    split_pipelines: false\n",
    );
    let out = p.run(&["generate", "-o", OUTPUT]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("over extensions.gitlab.max_yaml_size_bytes (60000)")
            && out.stderr.contains("(pipeline-limit)"),
        "{}",
        out.stderr
    );
    assert!(!p.path().join(OUTPUT).exists());
    assert!(!p.path().join(CHILDREN).exists());

    // Splitting on, but to stdout: the children need a file to be written beside.
    configure(&p, "    max_yaml_size_bytes: 60000\n");
    let out = p.run(&["generate"]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stderr.contains("(pipeline-limit)") && out.stderr.contains("-o FILE"),
        "{}",
        out.stderr
    );
    assert_eq!(out.stdout, "");
}

#[test]
fn the_generate_job_the_children_come_from_is_configurable() {
    let (p, _) = synthetic_monorepo(30);
    configure(
        &p,
        "    max_yaml_size_bytes: 60000\n    generate_job: terraci-generate\n",
    );
    let out = p.run(&["generate", "-o", "pipeline.yml"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let parent = entries(&p.read("pipeline.yml"));
    assert_eq!(
        parent["terraci-children"]["needs"][0]["job"].as_str(),
        Some("terraci-generate")
    );
    assert_eq!(
        parent["terraci-child-1"]["trigger"]["include"][0]["artifact"].as_str(),
        Some("pipeline.d/child-1.yml")
    );
}

#[test]
fn a_pipeline_over_the_jobs_limit_is_split_into_children_under_it() {
    let (p, _) = synthetic_monorepo(30);
    let whole = whole_pipeline(&p);
    // 30 plans, 30 applies and the summary job; each child has its own summary job.
    configure(&p, "    max_jobs: 25\n");
    let out = p.run(&["generate", "-o", OUTPUT]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let split = read_split(p.path(), OUTPUT, CHILDREN);
    check_against_whole(&split, &whole, 2 * 1024 * 1024);
    assert_eq!(split.children.len(), 3);
    for (file, entries) in &split.children {
        let jobs = entries
            .iter()
            .filter(|(name, job)| {
                !name.as_str().is_some_and(|n| n.starts_with('.')) && job.get("stage").is_some()
            })
            .count();
        assert!(jobs <= 25, "{file}: {jobs} jobs");
        assert!(entries.contains_key("terraci-summary"), "{file}");
    }
}

#[test]
#[cfg_attr(
    not(feature = "clients"),
    ignore = "runs a CI client or terraform: the clients tier (bash .ci/test)"
)]
fn every_document_of_a_split_is_under_gitlabs_measure_and_gitlab_ci_local_lists_it() {
    // 200 modules under a small limit, 2,000 under GitLab's default (10,000 take minutes
    // of gitlab-ci-local: docs/configuration.md gives their figures).
    for (n, limit) in [(200, 150_000), (2000, 2 * 1024 * 1024)] {
        let (p, _) = synthetic_monorepo(n);
        configure(&p, &format!("    max_yaml_size_bytes: {limit}\n"));
        let out = p.run(&["generate", "-o", OUTPUT]);
        assert_eq!(out.code, 0, "{}", out.stderr);
        let split = read_split(p.path(), OUTPUT, CHILDREN);
        assert!(split.children.len() > 1, "{n} modules");
        let documents = std::iter::once(OUTPUT.to_owned()).chain(
            split
                .children
                .keys()
                .map(|file| format!("{CHILDREN}/{file}")),
        );
        for path in documents {
            let text = p.read(&path);
            let measured = crate::gitlab_size::ruby_size(&p, &path);
            let estimate = terraci_render::gitlab_loaded_size(&[&text]);
            assert!(
                measured <= estimate && counted(&text) <= limit,
                "{n} modules, {path}: GitLab's measure {measured}, estimate {estimate}, \
                 limit {limit}"
            );
            let listed = crate::support::gitlab_ci_local_list(&text)
                .unwrap_or_else(|e| panic!("{n} modules, {path}: {e}"));
            let jobs: Vec<String> = entries(&text)
                .keys()
                .filter_map(|k| k.as_str())
                .filter(|k| k.starts_with("plan-") || k.starts_with("terraci-child-"))
                .map(str::to_owned)
                .collect();
            assert!(!jobs.is_empty(), "{path}");
            for job in jobs {
                assert!(
                    listed.lines().any(|line| line.starts_with(&job)),
                    "{path}: {job} is not listed:\n{listed}"
                );
            }
        }
    }
}

/// A chain of `len` modules `<group>/m<k>` with local state in `state`, each reading the
/// one before it and keeping what it read in its `terraform_data`.
fn chain(p: &Project, state: &Path, group: &str, len: usize) {
    for k in 0..len {
        let backend = format!(
            "terraform {{\n  backend \"local\" {{\n    path = \"{}/{group}-m{k}.tfstate\"\n  }}\n}}\n\n",
            state.display()
        );
        let body = if k == 0 {
            format!("resource \"terraform_data\" \"x\" {{\n  input = \"{group}/m0\"\n}}\n")
        } else {
            format!(
                "data \"terraform_remote_state\" \"prev\" {{\n  backend = \"local\"\n  config = {{\n    path = \"{}/{group}-m{}.tfstate\"\n  }}\n}}\n\nresource \"terraform_data\" \"x\" {{\n  input = \"{group}/m{k} after ${{data.terraform_remote_state.prev.outputs.id}}\"\n}}\n",
                state.display(),
                k - 1
            )
        };
        p.write(
            &format!("{group}/m{k}/main.tf"),
            format!("{backend}{body}\noutput \"id\" {{\n  value = terraform_data.x.output\n}}\n"),
        );
    }
}

/// The triggers of `split` in an order their `needs` allow: each after those it waits for.
fn trigger_order(split: &Split) -> Vec<String> {
    let mut order: Vec<String> = Vec::new();
    while order.len() < split.triggers.len() {
        let next = split
            .triggers
            .iter()
            .find(|(name, (_, after))| {
                !order.contains(name) && after.iter().all(|a| order.contains(a))
            })
            .map(|(name, _)| name.clone())
            .expect("the triggers' needs have no cycle");
        order.push(next);
    }
    order
}

#[test]
#[cfg_attr(
    not(feature = "clients"),
    ignore = "runs a CI client or terraform: the clients tier (bash .ci/test)"
)]
fn child_pipelines_run_in_the_triggers_order_apply_every_module_after_those_it_reads() {
    // Eleven modules with real terraform: a chain of six, over the limit alone, split
    // into two links; chains of three and two packed beside it.
    split_pipelines_apply_in_order(&[("a", 6), ("b", 3), ("c", 2)], 30000);
}

#[test]
#[cfg_attr(
    not(feature = "clients"),
    ignore = "runs a CI client or terraform: the clients tier (bash .ci/test)"
)]
fn two_hundred_modules_split_into_child_pipelines_apply_every_module_after_those_it_reads() {
    // 200 modules, 400 jobs (about four minutes on two cores): twenty chains of ten, each
    // over the limit alone (a chain of children), the chains packed beside each other.
    let groups: Vec<(String, usize)> = (0..20).map(|g| (format!("g{g:02}"), 10)).collect();
    let groups: Vec<(&str, usize)> = groups.iter().map(|(g, n)| (g.as_str(), *n)).collect();
    split_pipelines_apply_in_order(&groups, 60000);
}

/// Chains of `groups` (name, length) of real-terraform modules, generated over a
/// `budget` small enough to split, each child run with gitlab-ci-local in an order the
/// parent's triggers allow: every module must have applied after the one it reads.
fn split_pipelines_apply_in_order(groups: &[(&str, usize)], budget: u64) {
    let work = tempfile::tempdir().expect("temp dir");
    let state = work.path().join("state");
    std::fs::create_dir_all(&state).expect("mkdir state");
    let p = Project::empty();
    for &(group, len) in groups {
        chain(&p, &state, group, len);
    }
    p.write(
        ".terraci.yaml",
        format!("structure:\n  pattern: \"{{env}}/{{module}}\"\nextensions:\n  gitlab:\n    max_yaml_size_bytes: {budget}\n"),
    );
    p.write(
        ".gitignore",
        ".terraform/\n.terraform.lock.hcl\n*.tfplan\n.terraci/\n",
    );
    let out = p.run(&["generate", "--auto-approve", "-o", OUTPUT]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let split = read_split(p.path(), OUTPUT, CHILDREN);
    assert!(
        split.triggers.values().any(|(_, after)| !after.is_empty()),
        "a chain of children"
    );
    crate::support::commit_all(p.path());
    let home = work.path().join("home");
    // gitlab-ci-local runs no downstream pipeline: each child on its own, in an order
    // the parent's triggers allow.
    for trigger in trigger_order(&split) {
        let file = format!("{CHILDREN}/{}", split.triggers[&trigger].0);
        let (ok, output) =
            crate::real_terraform::gitlab_ci_local_with(p.path(), &home, &[], &["--file", &file]);
        assert!(ok, "{trigger} ({file}) failed:\n{output}");
    }
    // Each module applied what it read from the one before it: applied after it.
    for &(group, len) in groups {
        let mut expected = format!("{group}/m0");
        for k in 0..len {
            if k > 0 {
                expected = format!("{group}/m{k} after {expected}");
            }
            assert_eq!(
                crate::real_terraform::applied_input(&state, &format!("{group}-m{k}")),
                Some(expected.clone()),
                "{group}/m{k}"
            );
        }
    }
}

#[test]
fn a_changed_only_pipeline_over_the_limit_is_split_the_same_way() {
    let (p, _) = synthetic_monorepo(40);
    crate::support::commit_all(p.path());
    crate::support::git(p.path(), &["checkout", "-q", "-b", "feature"]);
    // The first module of one context: it and the nine that read it, directly or not.
    let changed = "svc1/dev/r0/m0/main.tf";
    p.write(changed, format!("{}\n# changed\n", p.read(changed)));
    crate::support::git(p.path(), &["commit", "-qam", "change"]);
    let changed_only = ["generate", "--changed-only", "--base-ref", "main"];
    configure(&p, "    max_yaml_size_bytes: 100000000\n");
    let out = p.run(&changed_only);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let whole = out.stdout;
    assert_eq!(whole.matches("\nplan-").count(), 10, "{whole}");

    configure(&p, "    max_yaml_size_bytes: 30000\n");
    let out = p.run(&[&changed_only[..], &["-o", OUTPUT]].concat());
    assert_eq!(out.code, 0, "{}", out.stderr);
    let split = read_split(p.path(), OUTPUT, CHILDREN);
    assert!(split.children.len() > 1);
    check_against_whole(&split, &whole, 30_000);
}

#[test]
fn a_replayed_run_leaves_no_child_of_an_earlier_split() {
    let (p, _) = synthetic_monorepo(30);
    // A run is recorded once the files it read have settled.
    std::thread::sleep(std::time::Duration::from_millis(120));
    let out = p.run(&["generate", "-o", OUTPUT, "-v"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    // Children of a split run since (which is not recorded), and a file of the user's.
    p.write(&format!("{CHILDREN}/child-1.yml"), "stale: true\n");
    p.write(&format!("{CHILDREN}/.child-2.yml.tmp"), "stale: true\n");
    p.write(&format!("{CHILDREN}/child-notes.yml"), "mine: true\n");
    let out = p.run(&["generate", "-o", OUTPUT, "-v"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("replayed the last run"),
        "{}",
        out.stderr
    );
    let left: Vec<String> = std::fs::read_dir(p.path().join(CHILDREN))
        .expect("the directory")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, ["child-notes.yml"]);
}

#[test]
fn a_split_run_is_generated_again_rather_than_replayed() {
    let (p, _) = synthetic_monorepo(30);
    configure(&p, "    max_yaml_size_bytes: 60000\n");
    std::thread::sleep(std::time::Duration::from_millis(120));
    for _ in 0..2 {
        let out = p.run(&["generate", "-o", OUTPUT, "-v"]);
        assert_eq!(out.code, 0, "{}", out.stderr);
        // A run record replays one file: the children would not be written.
        assert!(!out.stderr.contains("replayed"), "{}", out.stderr);
        assert!(read_split(p.path(), OUTPUT, CHILDREN).children.len() > 1);
    }
}

#[test]
fn a_child_pipeline_that_would_not_change_is_left_as_it_is() {
    use std::os::unix::fs::MetadataExt as _;
    let (p, _) = synthetic_monorepo(30);
    configure(&p, "    max_yaml_size_bytes: 60000\n");
    // Each child's file as it is on disk: a rewrite puts a new file in its place.
    let files = |p: &Project| -> BTreeMap<String, (u64, String)> {
        std::fs::read_dir(p.path().join(CHILDREN))
            .expect("the directory")
            .map(|e| {
                let e = e.expect("entry");
                let text = std::fs::read_to_string(e.path()).expect("a child");
                let inode = e.metadata().expect("metadata").ino();
                (e.file_name().to_string_lossy().into_owned(), (inode, text))
            })
            .collect()
    };
    let out = p.run(&["generate", "-o", OUTPUT]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let first = files(&p);
    assert!(first.len() > 1, "{first:?}");
    let out = p.run(&["generate", "-o", OUTPUT]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let inodes = |files: &BTreeMap<String, (u64, String)>| -> BTreeMap<String, u64> {
        files
            .iter()
            .map(|(name, (inode, _))| (name.clone(), *inode))
            .collect()
    };
    let second = files(&p);
    assert_eq!(
        inodes(&second),
        inodes(&first),
        "the children were rewritten"
    );
    assert!(second == first, "the children changed");

    // A child changed since is written again; the others are still left alone.
    p.write(&format!("{CHILDREN}/child-1.yml"), "damaged: true\n");
    let out = p.run(&["generate", "-o", OUTPUT]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let again = files(&p);
    assert!(
        again["child-1.yml"].1 == first["child-1.yml"].1,
        "child-1 was not restored"
    );
    for (name, (inode, text)) in &again {
        if name != "child-1.yml" {
            assert_eq!(*inode, first[name].0, "{name} was rewritten");
            assert!(*text == first[name].1, "{name} changed");
        }
    }
}

#[test]
fn a_limit_one_module_alone_is_over_is_an_error_and_nothing_is_written() {
    let (p, _) = synthetic_monorepo(30);
    configure(&p, "    max_yaml_size_bytes: 8000\n");
    let out = p.run(&["generate", "-o", OUTPUT]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("over extensions.gitlab.max_yaml_size_bytes (8000)")
            && out.stderr.contains("(pipeline-limit)"),
        "{}",
        out.stderr
    );
    assert!(!p.path().join(OUTPUT).exists());
    assert!(!p.path().join(CHILDREN).exists());
}

/// A module of the default pattern at `svc/dev/r0/<name>` with its state in s3, reading
/// the state of each of `reads`.
fn s3_module(p: &Project, name: &str, reads: &[&str]) {
    let key = |m: &str| format!("svc/dev/r0/{m}/terraform.tfstate");
    let mut text = format!(
        "terraform {{\n  backend \"s3\" {{\n    bucket = \"state\"\n    key    = \"{}\"\n  }}\n}}\n",
        key(name)
    );
    for read in reads {
        text.push_str(&format!(
            "\ndata \"terraform_remote_state\" \"{read}\" {{\n  backend = \"s3\"\n  config = {{\n    bucket = \"state\"\n    key    = \"{}\"\n  }}\n}}\n",
            key(read)
        ));
    }
    p.write(&format!("svc/dev/r0/{name}/main.tf"), text);
}

#[test]
fn a_rank_spread_over_more_children_than_a_trigger_may_need_is_an_error() {
    // Twenty modules read one hub, and one more reads one of them: under a small limit
    // the twenty are spread over children, and the last module's child waits for each.
    let p = Project::empty();
    s3_module(&p, "hub", &[]);
    for i in 0..20 {
        s3_module(&p, &format!("a{i:02}"), &["hub"]);
    }
    s3_module(&p, "z", &["a00"]);
    let whole = whole_pipeline(&p);
    configure(&p, "    max_yaml_size_bytes: 40000\n");
    let out = p.run(&["generate", "-o", OUTPUT]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let split = read_split(p.path(), OUTPUT, CHILDREN);
    check_against_whole(&split, &whole, 40_000);
    let most = split
        .triggers
        .values()
        .map(|(_, after)| after.len())
        .max()
        .unwrap_or(0);
    assert!(most >= 2, "{most}");
    // With fewer needs allowed than that, GitLab would refuse the parent: an error.
    configure(
        &p,
        &format!("    max_yaml_size_bytes: 40000\n    needs_limit: {most}\n"),
    );
    let out = p.run(&["generate", "-o", "other.yml"]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("extensions.gitlab.needs_limit: the trigger of child pipeline"),
        "{}",
        out.stderr
    );
    assert!(!p.path().join("other.yml").exists());
}

#[test]
fn a_jobs_limit_one_module_alone_is_over_is_an_error() {
    // A module's plan and apply stay together, with the summary job: three jobs.
    let (p, _) = synthetic_monorepo(4);
    configure(&p, "    max_jobs: 2\n");
    let out = p.run(&["generate", "-o", OUTPUT]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("has 3 jobs, over extensions.gitlab.max_jobs (2)"),
        "{}",
        out.stderr
    );
    assert!(!p.path().join(OUTPUT).exists());
    assert!(!p.path().join(CHILDREN).exists());
}
