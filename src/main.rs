// Queries allocate many small values on every core; glibc's malloc spent a third of a
// cold run in locking and page faults, mimalloc a fraction of that.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().collect();
    let cli = terraci::cli::Cli::parse();
    let (stdout, stderr) = (std::io::stdout(), std::io::stderr());
    let mut io = terraci::run::Io {
        system: &terraci::system::OsSystem,
        stdout: &mut stdout.lock(),
        stderr: &mut stderr.lock(),
        argv: terraci::run::display_argv(&argv),
    };
    ExitCode::from(terraci::run::run(cli, &mut io))
}
