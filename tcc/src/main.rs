//! The `tcc` command-line driver. All logic lives in [`tcc::cli`]; this file only turns its result into
//! an exit code and makes sure no panic reaches the user.

use std::process::ExitCode;

fn main() -> ExitCode {
    // A panic is a bug in tcc: report it as an internal error (exit 2), never as a crash.
    std::panic::set_hook(Box::new(|info| {
        // A closed stdout (`tcc ir f.tc | head`) is how pipelines end, not a bug: stop quietly with
        // the status a shell expects from SIGPIPE.
        if info.to_string().contains("Broken pipe") {
            std::process::exit(141);
        }
        eprintln!("error: internal error in tcc (this is a bug): {info}");
    }));
    match std::panic::catch_unwind(tcc::cli::main) {
        Ok(code) => code,
        Err(_) => ExitCode::from(2),
    }
}
