//! # canopy-client
//!
//! The request path the front ends share, and the client side of service
//! mode: everything `canopy` and `canopy mcp` need to answer a request from
//! the local index or, with `--service-url`, from a running `canopy serve`
//! without the server (no axum, no registry).
//!
//! * [`api`]: the HTTP API's wire types, which the server answers with;
//! * [`client`]: [`client::ServiceClient`], a small blocking HTTP/1.1 client;
//! * [`served`]: [`served::Served`], an answer of the service, typed, with
//!   where it came from (repository, generation, commit);
//! * [`overlay`]: the dirty-file overlay, so answers never predate the
//!   caller's own uncommitted edits;
//! * [`backend`]: [`backend::Backend`], what answers a front end's requests:
//!   [`local::LocalBackend`] (the repository's own index) or
//!   [`remote::RemoteBackend`] (a registered repository of the service,
//!   with the overlay merged in);
//! * [`request`]: the requests, validated once into typed values, and the
//!   query parameters as front ends parse them ([`request::SearchArgs`]);
//! * [`follow`]: the agent runtime over the event feed (`canopy follow`);
//! * [`auth`]: where a local service keeps its generated token, which
//!   clients on the same machine read when given none.
//!
//! ```no_run
//! let client = canopy_client::client::ServiceClient::new("http://127.0.0.1:3000")?;
//! for repo in client.repos()? {
//!     println!("{} {} generation {}", repo.repo_id, repo.name, repo.generation);
//! }
//! # Ok::<(), canopy_client::client::ClientError>(())
//! ```
//!
//! Only HTTP is known here: the protocols of the front ends (MCP, the
//! command line) stay in their crates.

#![warn(missing_docs)]

pub mod api;
pub mod auth;
pub mod backend;
pub mod client;
pub mod follow;
pub mod known_fields;
pub mod local;
pub mod overlay;
pub mod remote;
pub mod request;
pub mod served;
