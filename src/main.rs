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
