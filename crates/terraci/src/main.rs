// Queries allocate many small values on every core; glibc's malloc spent a third of a
// cold run in locking and page faults, mimalloc a fraction of that.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::process::ExitCode;

use clap::Parser;

/// mimalloc's `mi_option_purge_delay` (`mimalloc.h`, both the v2 and the v3 enums): how
/// long freed memory waits before it is returned to the system; -1 is never.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().collect();
    let cli = terraci::cli::Cli::parse();
    if !matches!(cli.command, terraci::cli::Command::Lsp(_)) {
        // Freed memory stays the process's. A one-shot command exits soon: handing
        // pages back (an `madvise` per run of pages, a TLB shootdown on every core) only
        // for them to fault in again when reused cost 3-5% of a 10,000-module run, at
        // the same peak RSS. A watch session builds and drops a pipeline text (13 MB at
        // 10,000 modules) on every regeneration: returned each time, writing the file
        // from pages that fault in again took four times as long. Its peak is what it
        // holds anyway. The language server, idle most of its life, gives memory back.
        // SAFETY: sets a plain integer option; mimalloc reads it on its next purge.
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1) };
    }
    let stdout = std::io::stdout();
    // The language server writes its messages from a thread of its own (lsp-server's
    // writer), which would wait forever for a lock this thread held; it prints nothing
    // else.
    let (mut locked, mut none);
    let out: &mut dyn std::io::Write = if matches!(cli.command, terraci::cli::Command::Lsp(_)) {
        none = std::io::sink();
        &mut none
    } else {
        locked = stdout.lock();
        &mut locked
    };
    let mut io = terraci::commands::Io {
        system: &terraci_db::system::OsSystem,
        stdout: out,
        // Not locked for the whole run: local-exec's progress display draws from its own
        // thread, which would wait for the lock forever (a terminal froze at 0/N).
        stderr: &mut std::io::stderr(),
        argv: terraci::commands::display_argv(&argv),
    };
    ExitCode::from(terraci::commands::run(cli, &mut io))
}
