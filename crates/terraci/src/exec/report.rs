//! What a run shows: live progress (an indicatif bar or plain lines) and the final
//! summary table.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::io::{self, Write};
use std::time::Duration;

use camino::{Utf8Path, Utf8PathBuf};

use super::schedule::Event;
use super::{ExecSummary, ProgressStyle, Status, Task};

/// Shows scheduler events as they arrive.
pub(super) trait Progress {
    fn event(&mut self, event: &Event, out: &mut dyn Write) -> io::Result<()>;
    fn finish(&mut self);
}

pub(super) fn progress<'a>(
    style: ProgressStyle,
    tasks: &'a [Task],
    log_dir: &Utf8Path,
) -> Box<dyn Progress + 'a> {
    let lines = Lines {
        tasks,
        log_dir: log_dir.to_owned(),
        running: BTreeSet::new(),
        done: 0,
        failed: 0,
        skipped: 0,
    };
    match style {
        ProgressStyle::Plain => Box::new(Plain(lines)),
        ProgressStyle::Terminal => Box::new(Terminal::new(lines)),
    }
}

/// The counts and the one-line text of each event, shared by both styles.
struct Lines<'a> {
    tasks: &'a [Task],
    log_dir: Utf8PathBuf,
    running: BTreeSet<usize>,
    done: usize,
    failed: usize,
    skipped: usize,
}

impl Lines<'_> {
    /// Updates the counts; returns the line to show for `event`, if any.
    fn update(&mut self, event: &Event) -> String {
        let total = self.tasks.len();
        match event {
            Event::Started(i) => {
                self.running.insert(*i);
                format!("start   {}", self.tasks[*i].job)
            }
            Event::Finished(i, status, duration) => {
                self.running.remove(i);
                self.done += 1;
                let job = &self.tasks[*i].job;
                let progress = format!("[{}/{total}]", self.done);
                match status {
                    Status::Succeeded => {
                        format!("{progress} ok      {job} ({})", format_duration(*duration))
                    }
                    Status::Failed { reason, .. } => {
                        self.failed += 1;
                        let log = self.log_dir.join(format!("{job}.log"));
                        format!("{progress} FAILED  {job}: {reason}; log: {log}")
                    }
                    Status::Skipped { because } => {
                        self.skipped += 1;
                        format!("{progress} skipped {job}: {because} failed")
                    }
                    Status::NotStarted => format!("{progress} not started {job}"),
                }
            }
            Event::Interrupted { running: 0 } => "interrupted: starting no new jobs".to_owned(),
            Event::Interrupted { running } => format!(
                "interrupted: starting no new jobs, waiting for {running} running job{}",
                if *running == 1 { "" } else { "s" }
            ),
        }
    }

    fn status_line(&self) -> String {
        let names: Vec<&str> = self
            .running
            .iter()
            .map(|&i| self.tasks[i].job.as_str())
            .collect();
        let mut line = format!("running {}", self.running.len());
        if self.failed > 0 {
            let _ = write!(line, " · failed {}", self.failed);
        }
        if self.skipped > 0 {
            let _ = write!(line, " · skipped {}", self.skipped);
        }
        if !names.is_empty() {
            let _ = write!(line, " · {}", names.join(", "));
        }
        line
    }
}

struct Plain<'a>(Lines<'a>);

impl Progress for Plain<'_> {
    fn event(&mut self, event: &Event, out: &mut dyn Write) -> io::Result<()> {
        let line = self.0.update(event);
        writeln!(out, "{}", terraci_db::escape::printable(&line))
    }

    fn finish(&mut self) {}
}

/// A bar on stderr with the counts and the running jobs; finished jobs scroll above it.
struct Terminal<'a> {
    lines: Lines<'a>,
    bar: indicatif::ProgressBar,
}

impl<'a> Terminal<'a> {
    fn new(lines: Lines<'a>) -> Self {
        let bar = indicatif::ProgressBar::with_draw_target(
            Some(lines.tasks.len() as u64),
            indicatif::ProgressDrawTarget::stderr(),
        );
        let style = indicatif::ProgressStyle::with_template(
            "{spinner} [{elapsed}] {pos}/{len} done · {wide_msg}",
        )
        .expect("the template is valid");
        bar.set_style(style);
        bar.enable_steady_tick(Duration::from_millis(120));
        bar.set_message(lines.status_line());
        Terminal { lines, bar }
    }
}

impl Progress for Terminal<'_> {
    fn event(&mut self, event: &Event, _out: &mut dyn Write) -> io::Result<()> {
        let line = self.lines.update(event);
        if !matches!(event, Event::Started(_)) {
            self.bar.println(terraci_db::escape::printable(&line));
        }
        self.bar.set_position(self.lines.done as u64);
        self.bar
            .set_message(terraci_db::escape::printable(&self.lines.status_line()).into_owned());
        Ok(())
    }

    fn finish(&mut self) {
        self.bar.finish_and_clear();
    }
}

/// `1.2s`, `3m05s`.
pub(super) fn format_duration(d: Duration) -> String {
    let secs = d.as_secs_f64();
    if secs < 60.0 {
        format!("{secs:.1}s")
    } else {
        let whole = d.as_secs();
        format!("{}m{:02}s", whole / 60, whole % 60)
    }
}

pub(super) fn summary_table(summary: &ExecSummary) -> String {
    let rows: Vec<[String; 4]> = summary
        .results
        .iter()
        .map(|r| {
            let (status, time) = match &r.status {
                Status::Succeeded => ("ok".to_owned(), format_duration(r.duration)),
                Status::Failed { reason, .. } => {
                    (format!("failed: {reason}"), format_duration(r.duration))
                }
                Status::Skipped { because } => {
                    (format!("skipped: {because} failed"), "-".to_owned())
                }
                Status::NotStarted => ("not started".to_owned(), "-".to_owned()),
            };
            // For a terminal: a name's line breaks would split the row.
            let cell = |s: &str| terraci_db::escape::printable(s).into_owned();
            [cell(&r.job), cell(&r.module), cell(&status), time]
        })
        .collect();
    let header = ["JOB", "MODULE", "STATUS", "TIME"].map(String::from);
    let mut widths = [0; 3];
    for row in std::iter::once(&header).chain(&rows) {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut text = String::new();
    for row in std::iter::once(&header).chain(&rows) {
        let _ = writeln!(
            text,
            "{:w0$}  {:w1$}  {:w2$}  {}",
            row[0],
            row[1],
            row[2],
            row[3],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2],
        );
    }

    let count = |f: fn(&Status) -> bool| summary.results.iter().filter(|r| f(&r.status)).count();
    let mut totals = vec![
        format!("{} succeeded", count(|s| *s == Status::Succeeded)),
        format!("{} failed", count(|s| matches!(s, Status::Failed { .. }))),
        format!("{} skipped", count(|s| matches!(s, Status::Skipped { .. }))),
    ];
    let not_started = count(|s| *s == Status::NotStarted);
    if not_started > 0 {
        totals.push(format!("{not_started} not started"));
    }
    let _ = write!(
        text,
        "{} in {}",
        totals.join(", "),
        format_duration(summary.elapsed)
    );
    if summary.interrupted {
        text.push_str(" (interrupted)");
    }
    text.push('\n');
    text
}
