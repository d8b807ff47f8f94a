//! The service stops on SIGTERM within seconds, even with requests that
//! will never finish on their own (issue 15 item 3: a server that kept
//! working after its 503 ignored SIGTERM).
//!
//! They test the HTTP service (`canopy-service`) through the `canopy`
//! binary, so they live in canopy-cli, where Cargo builds it for them.

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use canopy_test_support::canopy_bin;
use canopy_test_support::repo::Repo;
use canopy_test_support::serve::{Opts, Server, add_and_index};

/// Bounded wait for the process to exit after SIGTERM: the service's grace
/// period is 3 s; this leaves room for a slow CI machine. It is a bound on
/// a hang, not a timing measurement.
const EXIT_BOUND: Duration = Duration::from_secs(30);

#[test]
fn sigterm_stops_the_service_with_a_request_still_open() {
    let data = tempfile::tempdir().unwrap();
    let mut server = Server::start(canopy_bin!(), data.path(), &Opts::default());
    let client = server.client();
    let repo = Repo::small();
    add_and_index(&client, &repo);

    // A client that announced a large body and never sends it: the request
    // stays in flight for as long as the server is willing to wait.
    let addr = server.url.trim_start_matches("http://").to_string();
    let mut stuck = TcpStream::connect(&addr).expect("connect");
    write!(
        stuck,
        "POST /query HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{{\"repo\":"
    )
    .expect("send");
    stuck.flush().expect("flush");
    std::thread::sleep(Duration::from_millis(300));

    assert!(
        server.terminate(EXIT_BOUND),
        "canopy serve still running {EXIT_BOUND:?} after SIGTERM; log:\n{}",
        server.log()
    );
    assert!(server.log().contains("shutting down"), "{}", server.log());
    drop(stuck);
}
