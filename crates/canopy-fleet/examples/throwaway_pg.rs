//! A throwaway PostgreSQL for benchmarks and manual runs
//! (`bench/fleet.py` uses it): starts one (see `canopy_fleet::testing`),
//! prints `url=postgres://…` on stdout, and stops it and removes its data
//! when its standard input closes — so the server goes away with whatever
//! started it, even when that was killed.
//!
//! ```sh
//! cargo run -p canopy-fleet --example throwaway_pg      # Ctrl-D stops it
//! ```

use std::io::{BufRead, Write};

fn main() -> std::process::ExitCode {
    let server = match canopy_fleet::testing::PgServer::start(None) {
        Ok(Some(s)) => s,
        Ok(None) => {
            eprintln!(
                "no PostgreSQL server binaries found (install postgresql or set CANOPY_PG_BIN)"
            );
            return std::process::ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("cannot start PostgreSQL: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    println!("url={}", server.url());
    let _ = std::io::stdout().flush();
    // Block until stdin closes (or a line "stop" arrives).
    let stdin = std::io::stdin();
    for line in stdin.lock().lines() {
        match line {
            Ok(l) if l.trim() == "stop" => break,
            Ok(_) => continue,
            Err(_) => break,
        }
    }
    drop(server);
    std::process::ExitCode::SUCCESS
}
