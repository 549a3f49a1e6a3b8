//! The floor for a cold run: walk a project and read every file, on all cores, the way
//! discovery does (directories level by level, files in parallel), and nothing else.
//! `generate` can not be faster than this; the README's ratio is cold `generate` over it.
//!
//! Run: `cargo bench --bench read_floor -- DIR [RUNS]`; prints the median in ms, and the
//! files and bytes read. `.terraci/` (the caches) is skipped, as discovery skips it.

// A measuring harness reads the disk directly; the System boundary is for the product.
#![allow(clippy::disallowed_methods)]

use std::path::PathBuf;
use std::time::Instant;

use rayon::prelude::*;

fn main() {
    // `cargo bench` passes `--bench` first.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let Some(dir) = args.first() else {
        eprintln!("usage: read_floor DIR [RUNS]");
        std::process::exit(2);
    };
    let runs: usize = args.get(1).and_then(|r| r.parse().ok()).unwrap_or(15);
    let mut times = Vec::with_capacity(runs);
    let mut total = (0, 0);
    for _ in 0..runs {
        let started = Instant::now();
        total = read_all(PathBuf::from(dir));
        times.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    times.sort_by(f64::total_cmp);
    println!(
        "{:.1} ms median of {runs} ({} files, {} bytes)",
        times[runs / 2],
        total.0,
        total.1
    );
}

/// Files and bytes read.
fn read_all(root: PathBuf) -> (usize, usize) {
    let mut level = vec![root];
    let (mut files, mut bytes) = (0, 0);
    while !level.is_empty() {
        let listed: Vec<(Vec<PathBuf>, Vec<PathBuf>)> = level
            .par_iter()
            .map(|dir| {
                let (mut dirs, mut files) = (Vec::new(), Vec::new());
                for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                    match entry.file_type() {
                        Ok(t) if t.is_dir() && entry.file_name() != ".terraci" => {
                            dirs.push(entry.path())
                        }
                        Ok(t) if t.is_file() => files.push(entry.path()),
                        _ => {}
                    }
                }
                (dirs, files)
            })
            .collect();
        let mut next = Vec::new();
        let mut here = Vec::new();
        for (dirs, found) in listed {
            next.extend(dirs);
            here.extend(found);
        }
        bytes += here
            .par_iter()
            .map(|f| std::fs::read(f).map_or(0, |b| b.len()))
            .sum::<usize>();
        files += here.len();
        level = next;
    }
    (files, bytes)
}
